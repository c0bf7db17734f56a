//! One integration test binary (each file in `tests/` is another binary to
//! link and another redis-server to start). One module per area.

mod support;

mod client;
