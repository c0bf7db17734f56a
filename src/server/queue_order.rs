//! The order the fetch loop tries queues in (Go `processor.queues`):
//! strict priority, or a fresh weighted-random order for every fetch.

use std::collections::BTreeMap;

use rand::seq::SliceRandom;

/// The order queues are tried in (Go `processor.queues`).
#[derive(Clone, Debug)]
pub(crate) enum QueueOrder {
    /// Highest priority first, fixed (Go StrictPriority).
    Strict(Vec<String>),
    /// A fresh weighted-random order for every fetch: each queue appears
    /// priority/gcd times, shuffled, first occurrences kept.
    Weighted(Vec<(String, u32)>),
}

impl QueueOrder {
    /// Builds the order from queue → priority (priorities ≤ 0 and blank names dropped).
    pub fn new(queues: &BTreeMap<String, i32>, strict: bool) -> Self {
        let mut qs: Vec<(String, u32)> = queues
            .iter()
            .filter(|(q, p)| !q.trim().is_empty() && **p > 0)
            .map(|(q, p)| (q.clone(), *p as u32))
            .collect();
        if strict {
            qs.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
            QueueOrder::Strict(qs.into_iter().map(|(q, _)| q).collect())
        } else {
            let g = qs.iter().fold(0, |g, (_, p)| gcd(g, *p)).max(1);
            QueueOrder::Weighted(qs.into_iter().map(|(q, p)| (q, p / g)).collect())
        }
    }

    /// The order for one fetch.
    pub fn order(&self) -> Vec<String> {
        match self {
            QueueOrder::Strict(qs) => qs.clone(),
            QueueOrder::Weighted(qs) if qs.len() == 1 => vec![qs[0].0.clone()],
            QueueOrder::Weighted(qs) => {
                let mut slots: Vec<&str> = qs
                    .iter()
                    .flat_map(|(q, p)| std::iter::repeat_n(q.as_str(), *p as usize))
                    .collect();
                slots.shuffle(&mut rand::rng());
                let mut out: Vec<String> = Vec::with_capacity(qs.len());
                for q in slots {
                    if !out.iter().any(|o| o == q) {
                        out.push(q.to_string());
                    }
                }
                out
            }
        }
    }

    /// Every queue name.
    pub fn names(&self) -> Vec<String> {
        match self {
            QueueOrder::Strict(qs) => qs.clone(),
            QueueOrder::Weighted(qs) => qs.iter().map(|(q, _)| q.clone()).collect(),
        }
    }
}

fn gcd(a: u32, b: u32) -> u32 {
    if b == 0 { a } else { gcd(b, a % b) }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    /// Weighted order: a queue comes first with probability priority/Σ
    /// (Go's shuffle of priority copies); strict order is fixed.
    #[test]
    fn queue_order() {
        let qs = [
            ("critical".to_string(), 6),
            ("default".to_string(), 3),
            ("low".to_string(), 1),
        ]
        .into();
        let strict = QueueOrder::new(&qs, true);
        assert_eq!(strict.order(), ["critical", "default", "low"]);
        let weighted = QueueOrder::new(&qs, false);
        let mut firsts: HashMap<String, u32> = HashMap::new();
        for _ in 0..10_000 {
            let o = weighted.order();
            assert_eq!(o.len(), 3);
            *firsts.entry(o[0].clone()).or_default() += 1;
        }
        let share = |q: &str| f64::from(firsts[q]) / 10_000.0;
        assert!((share("critical") - 0.6).abs() < 0.03, "{firsts:?}");
        assert!((share("default") - 0.3).abs() < 0.03, "{firsts:?}");
        assert!((share("low") - 0.1).abs() < 0.03, "{firsts:?}");
        let dropped = QueueOrder::new(
            &[
                ("x".to_string(), 0),
                (" ".to_string(), 2),
                ("y".to_string(), 4),
            ]
            .into(),
            false,
        );
        assert_eq!(dropped.names(), ["y"]);
    }
}
