//! Shared by the benches: polling futures that never wait, and medians.

#![allow(dead_code)]

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::Instant;

/// Polls a future that completes without waiting, once. Inlined, as an
/// `.await` in the caller's future would be: a bench measures the future's
/// work, not a call that copies its output.
#[inline(always)]
pub fn ready<F: Future>(fut: F) -> F::Output {
    match pin!(fut).poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(out) => out,
        Poll::Pending => panic!("benchmark futures complete at once"),
    }
}

/// Median ns per call of `f`, over 21 samples of `iters` calls.
pub fn median_ns(iters: u32, mut f: impl FnMut()) -> f64 {
    for _ in 0..iters / 10 {
        f();
    }
    let mut samples: Vec<f64> = (0..21)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..iters {
                f();
            }
            start.elapsed().as_nanos() as f64 / f64::from(iters)
        })
        .collect();
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

/// Whether criterion was asked only to test or list the benches (then skip the ratio printouts).
pub fn quick_mode() -> bool {
    std::env::args().any(|a| a == "--test" || a == "--list")
}
