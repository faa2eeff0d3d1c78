//! A received bundle is usually dropped on another thread than the session's (the agent's, the application
//! writer's): its storage must still come back to the session's pool. Here rather than beside the pool, because
//! the crate's own sources start no thread (crates/dtnkit/tests/architecture.rs).

use tcpcl::{BufferPool, PoolLimits};

#[test]
fn a_bundle_dropped_on_another_thread_returns_its_storage() {
    const K: usize = 1 << 10;
    let pool = BufferPool::new(PoolLimits {
        max_buffers: 3,
        max_bytes: 4096 * K,
        min_capacity: 64 * K,
    });
    let mut buf = pool.take(128 * K);
    buf.resize(128 * K, 1);
    let ptr = buf.as_ptr();
    let bytes = pool.bytes(buf);
    std::thread::spawn(move || drop(bytes))
        .join()
        .expect("the dropping thread");
    assert_eq!(pool.kept().0, 1);
    let again = pool.take(100 * K);
    assert_eq!(again.as_ptr(), ptr, "the same storage, reused");
}
