//! `pii` on a 10,000-message history, the gated scan against the reference
//! scanner (every detector the census lets through over each text, the
//! patterns as they were: the scanner before #19), measured side by side in one process
//! (interleaved samples, medians): ASCII text, the same text with one `…` per
//! message, and mixed-script text. Prints each side's time, the
//! reference/gated ratio (goal ≥ 5x) and each scanner's non-ASCII/ASCII
//! cost ratio (the cliff: 1.0 is none). Then a model call's `before_model` over
//! the same history against the reference: a run's first call, and a later one
//! with remembered verdicts.
//!
//! Run: `cargo bench -p tinyagents --bench pii` (`-- --quick` for fewer samples).

#![allow(missing_docs)]

use std::time::Instant;

use tinyagents::middleware::{PiiMiddleware, PiiStrategy};
use tinyagents::prelude::*;
use tinyagents::testing::MiddlewareHarness;

const N: usize = 10_000;

/// Message `i` of a realistic history: prose with numbers, times, versions,
/// code; one in ten carries a value to redact.
fn message(i: usize) -> String {
    let mut m = match i % 4 {
        0 => format!(
            "The deploy of service {i} finished at 10:{:02}:{:02} with exit code 0; \
             version 2.{}.{} is live in region eu-west-1 and the p99 latency is {} ms.",
            i % 60,
            (i * 7) % 60,
            i % 13,
            i % 7,
            40 + i % 50
        ),
        1 => "I looked at the failing test: the iterator in `parse_line` returns early when \
              the buffer is empty, so the last record is dropped. A fix is to flush the \
              buffer before returning, and to add a test with a trailing record."
            .to_owned(),
        2 => format!(
            "fn total(items: &[Item]) -> u64 {{ items.iter().map(|x| x.price * {}).sum() }} \
             // called {} times per request, 3/4 of them cached",
            i % 9 + 1,
            i % 1000
        ),
        _ => format!(
            "Order #{} shipped on 2024-03-{:02}; 3 of 5 parcels arrived, the rest are due \
             within 2-3 days. Ratio 10-20-30 applies to the next batch.",
            10_000 + i,
            i % 28 + 1
        ),
    };
    if i.is_multiple_of(10) {
        m.push_str(" Contact ann.lee@example.com or +1 (415) 555-2671, card 4111 1111 1111 1111.");
    }
    m
}

fn history(kind: usize) -> Vec<String> {
    (0..N)
        .map(|i| {
            let m = message(i);
            match kind {
                0 => m,
                // one `…` per message (what a summariser leaves)
                1 => format!("{m}…"),
                // mixed scripts throughout
                _ => format!("Résumé für Jörg — {m} 日本語のメモ。"),
            }
        })
        .collect()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn scan(pii: &PiiMiddleware, texts: &[String]) -> f64 {
    let start = Instant::now();
    let mut found = 0usize;
    for t in texts {
        found += pii.redact_text(t).map_or(1, |(_, c)| c.len());
    }
    std::hint::black_box(found);
    start.elapsed().as_nanos() as f64
}

fn main() {
    if std::env::args().any(|a| a == "--test" || a == "--list") {
        return;
    }
    let quick = std::env::args().any(|a| a == "--quick");
    let samples = if quick { 5 } else { 15 };
    let fast = PiiMiddleware::new(PiiStrategy::Redact);
    let reference = fast.clone().reference_scanner();
    let histories = [history(0), history(1), history(2)];
    let names = ["ASCII", "ASCII + one `…` each", "mixed scripts"];
    // the same detections, or the comparison means nothing
    for h in &histories {
        for t in h {
            assert_eq!(fast.redact_text(t), reference.redact_text(t), "{t}");
        }
    }
    let mut times = vec![[Vec::new(), Vec::new()]; histories.len()];
    for _ in 0..samples {
        for (k, h) in histories.iter().enumerate() {
            times[k][0].push(scan(&reference, h));
            times[k][1].push(scan(&fast, h));
        }
    }
    let bytes: Vec<f64> = histories
        .iter()
        .map(|h| h.iter().map(String::len).sum::<usize>() as f64)
        .collect();
    println!("pii: redact_text over {N} messages (median of {samples} interleaved samples)");
    println!("| text | KiB | reference ms | gated ms | reference/gated | ns/KiB ref | ns/KiB gated |");
    println!("|---|---|---|---|---|---|---|");
    let mut per_kib = Vec::new();
    for (k, name) in names.iter().enumerate() {
        let r = median(std::mem::take(&mut times[k][0]));
        let f = median(std::mem::take(&mut times[k][1]));
        let kib = bytes[k] / 1024.0;
        per_kib.push((r / kib, f / kib));
        println!(
            "| {name} | {kib:.0} | {:.1} | {:.1} | {:.1}x | {:.0} | {:.0} |",
            r / 1e6,
            f / 1e6,
            r / f,
            r / kib,
            f / kib
        );
    }
    for (k, name) in names.iter().enumerate().skip(1) {
        println!(
            "cliff ({name} vs ASCII, per KiB): reference {:.2}x, gated {:.2}x",
            per_kib[k].0 / per_kib[0].0,
            per_kib[k].1 / per_kib[0].1
        );
    }

    // `before_model` over the whole history: the reference on every turn; the
    // default on a run's first model call (a fresh run: nothing remembered)
    // and on later calls (verdicts remembered).
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let request = ModelRequest::new(histories[1].iter().map(Message::user).collect::<Vec<_>>());
    let turn = |h: &mut MiddlewareHarness| {
        let r = request.clone();
        let start = Instant::now();
        let out = rt.block_on(h.before_model(r)).unwrap();
        let took = start.elapsed().as_nanos() as f64;
        std::hint::black_box(out);
        took
    };
    let mut hf: MiddlewareHarness = MiddlewareHarness::new(fast.clone());
    let mut hr: MiddlewareHarness = MiddlewareHarness::new(reference.clone());
    turn(&mut hf);
    let mut times = [Vec::new(), Vec::new(), Vec::new()];
    for _ in 0..samples {
        times[0].push(turn(&mut hr));
        times[1].push(turn(&mut MiddlewareHarness::new(fast.clone())));
        times[2].push(turn(&mut hf));
    }
    let [r, first, later] = times.map(median);
    println!(
        "before_model over {N} messages: reference {:.1} ms per turn; default first turn {:.1} ms ({:.1}x), \
         later turns {:.2} ms ({:.0}x)",
        r / 1e6,
        first / 1e6,
        r / first,
        later / 1e6,
        r / later
    );
}
