//! [`Page`]: which page of a listing to read, and what it means for a
//! Redis list or zset (Go: `rdb.Pagination` with its `start`/`stop`). The
//! broker's listings take a page and decide the ranges here; the inspector
//! passes the page through.

use crate::error::{Error, Result};

/// Which page of a listing to read (Go `asynq.Page` and `asynq.PageSize`).
///
/// `number` starts at 1; a page past the end is empty, not an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Page {
    /// Page number, 1-based.
    pub number: usize,
    /// Tasks per page, at least 1.
    pub size: usize,
}

impl Default for Page {
    /// Page 1 of 30 tasks (Go `defaultPageNum`, `defaultPageSize`).
    fn default() -> Self {
        Page {
            number: 1,
            size: 30,
        }
    }
}

impl Page {
    /// Page `number` (1-based) of `size` tasks. Errors with
    /// [`Error::InvalidArgument`] when either is 0.
    pub fn new(number: usize, size: usize) -> Result<Page> {
        let page = Page { number, size };
        page.validate()?;
        Ok(page)
    }

    /// Errors with [`Error::InvalidArgument`] when the number or the size is
    /// 0 (Go turns these into odd rank ranges instead).
    // asynq divergence: COMPATIBILITY.md#t4
    pub(crate) fn validate(&self) -> Result<()> {
        if self.number == 0 {
            return Err(Error::InvalidArgument(
                "page number starts at 1, got 0".into(),
            ));
        }
        if self.size == 0 {
            return Err(Error::InvalidArgument(
                "page size must be at least 1".into(),
            ));
        }
        Ok(())
    }

    /// The rank of the page's first element: `size·(number−1)`, saturating
    /// (a page that far out is empty anyway). Call [`Page::validate`] first.
    pub(crate) fn first(&self) -> usize {
        self.number.saturating_sub(1).saturating_mul(self.size)
    }

    /// The inclusive rank range of the page in a zset (Go
    /// `Pagination.start`/`stop`: `[size·(number−1), size·number − 1]`), or
    /// `None` when it lies beyond any possible end. Call
    /// [`Page::validate`] first.
    pub(crate) fn zset_range(&self) -> Option<(i64, i64)> {
        let size = i64::try_from(self.size).ok()?;
        let start = i64::try_from(self.number.checked_sub(1)?)
            .ok()?
            .checked_mul(size)?;
        Some((start, start.checked_add(size.checked_sub(1)?)?))
    }

    /// The inclusive LRANGE index range of the page counted from the right
    /// end of a list (the next task to run is rightmost), or `None` when it
    /// lies beyond any possible end. The elements come back newest first and
    /// must be reversed.
    pub(crate) fn list_range(&self) -> Option<(i64, i64)> {
        let (start, stop) = self.zset_range()?;
        Some((stop.checked_neg()?.checked_sub(1)?, -start - 1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Go's pagination arithmetic (wire spec §9.1): zset ranks
    /// `[s·p, s·p + s − 1]`, list indexes from the right end.
    #[test]
    fn page_ranges() {
        let p = Page::new(1, 2).unwrap();
        assert_eq!(p.zset_range(), Some((0, 1)));
        assert_eq!(p.list_range(), Some((-2, -1)));
        assert_eq!(p.first(), 0);
        let p = Page::new(3, 10).unwrap();
        assert_eq!(p.zset_range(), Some((20, 29)));
        assert_eq!(p.list_range(), Some((-30, -21)));
        assert_eq!(p.first(), 20);
        assert_eq!(
            Page::new(usize::MAX, usize::MAX).unwrap().zset_range(),
            None
        );
        assert_eq!(
            Page::new(usize::MAX, usize::MAX).unwrap().first(),
            usize::MAX
        );
        assert_eq!(
            Page::default(),
            Page {
                number: 1,
                size: 30
            }
        );
    }

    #[test]
    fn zero_page_is_invalid() {
        assert!(matches!(Page::new(0, 10), Err(Error::InvalidArgument(_))));
        assert!(matches!(Page::new(1, 0), Err(Error::InvalidArgument(_))));
    }
}
