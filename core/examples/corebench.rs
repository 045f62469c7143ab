//! In-process figures for the core alone (no gRPC, no Python): live heap bytes per run and
//! per-event time, on the traffic shapes of bench/grpc_bench.py.
//!
//!   cargo run --release --example corebench -- memory [runs]     heap + RSS per run, 30 records
//!   cargo run --release --example corebench -- scaling [runs]    spread ns/event, 1k vs `runs` runs
//!   cargo run --release --example corebench -- batch [pairs]     bench traffic, batches of 64
//!   cargo run --release --example corebench -- breakdown [pairs] the batch traffic's per-event
//!                                                                 time and allocations by stage
//!
//! Heap bytes are counted by a wrapping global allocator (exact, no noise); RSS is read from
//! /proc and includes allocator slack and fragmentation.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, AtomicUsize, Ordering};
use std::time::Instant;

use loopwarden_core::engine::Settings;
use loopwarden_core::pb;
use loopwarden_core::service::{Config, Core, Limits, Summary};
use prost::Message;

struct Counting;
static LIVE: AtomicIsize = AtomicIsize::new(0);
static CALLS: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        CALLS.fetch_add(1, Ordering::Relaxed);
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        System.dealloc(ptr, layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size as isize - layout.size() as isize, Ordering::Relaxed);
        CALLS.fetch_add(1, Ordering::Relaxed);
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn rss_kib() -> i64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status.lines().find(|l| l.starts_with("VmRSS:")).and_then(|l| l.split_whitespace().nth(1)?.parse().ok()).unwrap_or(0)
}

fn core(history: usize) -> Core {
    let config = Config { default: Settings { enabled: Some(true), history_size: history, ..Default::default() }, ..Default::default() };
    Core::new(config, Limits::default(), 200_000, 1e9, "bench".into(), vec![0.00001, 0.0001, 0.001, 0.01])
}

fn outcome(run: String, seq: u64, tool: &str, params: String, result: String) -> pb::Event {
    pb::Event {
        run_id: run,
        seq,
        kind: Some(pb::event::Kind::ToolOutcome(pb::ToolOutcome {
            tool_name: tool.into(),
            params_json: params,
            outcome: Some(pb::tool_outcome::Outcome::ResultJson(result)),
            ..Default::default()
        })),
        ..Default::default()
    }
}

fn call(run: String, seq: u64, tool: &str, params: String) -> pb::Event {
    pb::Event {
        run_id: run,
        seq,
        kind: Some(pb::event::Kind::ToolCall(pb::ToolCall { tool_name: tool.into(), params_json: params, ..Default::default() })),
        ..Default::default()
    }
}

fn send(core: &mut Core, events: Vec<pb::Event>) {
    let data = pb::EvaluateRequest { events }.encode_to_vec();
    let mut summary = Summary::default();
    let _ = core.evaluate_request(&data, "", "", 1000.0, &mut summary, false);
}

/// phase_fill_runs: `records` outcome events per run, distinct params, in batches of 256.
fn fill(core: &mut Core, prefix: &str, runs: usize, records: usize) {
    let pad = "p".repeat(150);
    let mut batch = Vec::with_capacity(256);
    for record in 0..records {
        for run in 0..runs {
            batch.push(outcome(format!("{prefix}-{run}"), record as u64, "read", format!("{{\"path\":\"/f/{record}\",\"pad\":\"{pad}\"}}"),
                               format!("{{\"details\":{{\"n\":{record}}}}}")));
            if batch.len() == 256 {
                send(core, std::mem::take(&mut batch));
            }
        }
    }
    if !batch.is_empty() {
        send(core, batch);
    }
}

struct Rng(u64);
impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

fn requests(events: Vec<pb::Event>, batch: usize) -> Vec<Vec<u8>> {
    events.chunks(batch).map(|c| pb::EvaluateRequest { events: c.to_vec() }.encode_to_vec()).collect()
}

/// ns per event of `requests` (best of `rounds`).
fn time(core: &mut Core, requests: &[Vec<u8>], events: usize, rounds: usize) -> f64 {
    let mut best = f64::MAX;
    for _ in 0..rounds {
        let started = Instant::now();
        for data in requests {
            let mut summary = Summary::default();
            let _ = core.evaluate_request(data, "", "", 1000.0, &mut summary, false);
        }
        best = best.min(started.elapsed().as_secs_f64() * 1e9 / events as f64);
    }
    best
}

/// phase_spread: call + outcome pairs over `runs` filled runs, 50 distinct params.
fn spread(runs: usize, pairs: usize, seed: u64) -> Vec<Vec<u8>> {
    let mut rng = Rng(seed);
    let pad = "p".repeat(400);
    let mut events = Vec::new();
    for index in 0..pairs {
        let run = format!("mem-{}", rng.below(runs));
        let params = format!("{{\"path\":\"/spread/{}\",\"pad\":\"{pad}\"}}", rng.below(50));
        events.push(call(run.clone(), index as u64, "read", params.clone()));
        events.push(outcome(run, index as u64, "read", params, "{\"details\":{\"ok\":true}}".into()));
    }
    requests(events, 64)
}

/// grpc_bench.py's traffic(): 400 runs, a fifth of them looping.
fn traffic(prefix: &str, pairs: usize) -> Vec<pb::Event> {
    let mut rng = Rng(7);
    let runs = 400;
    let loop_params = format!("{{\"path\": \"/var/log/app.log\", \"q\": \"{}\"}}", "x".repeat(600));
    let loop_result = format!("{{\"content\": [{{\"type\": \"text\", \"text\": \"no change {}\"}}], \"details\": {{\"ok\": true}}}}", "y".repeat(500));
    let mut events = Vec::new();
    for index in 0..pairs {
        let n = rng.below(runs);
        let run = format!("{prefix}-{n}");
        let (params, result) = if n < runs / 5 {
            if rng.below(100) == 0 {
                events.push(pb::Event { run_id: run.clone(), seq: index as u64, kind: Some(pb::event::Kind::CompactionRetry(pb::CompactionRetry {})), ..Default::default() });
            }
            (loop_params.clone(), loop_result.clone())
        } else {
            let size = 200 + rng.below(1800);
            (
                format!("{{\"path\": \"/src/{}.py\", \"query\": \"{}\", \"options\": {{\"limit\": 50, \"recursive\": true}}}}", rng.below(1_000_000), "q".repeat(size / 2)),
                format!("{{\"content\": [{{\"type\": \"text\", \"text\": \"{}\"}}], \"details\": {{\"lines\": {}}}}}", "r".repeat(200 + rng.below(1800)), rng.below(100)),
            )
        };
        let tool = if index % 3 != 0 { "read" } else { "search" };
        events.push(call(run.clone(), index as u64, tool, params.clone()));
        events.push(outcome(run, index as u64, tool, params, result));
    }
    events
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mode = args.get(1).map(String::as_str).unwrap_or("memory");
    let n: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(100_000);
    match mode {
        "memory" => {
            let mut c = core(30);
            fill(&mut c, "warm", 1000, 30);
            let (heap0, rss0, calls0) = (LIVE.load(Ordering::Relaxed), rss_kib(), CALLS.load(Ordering::Relaxed));
            let started = Instant::now();
            fill(&mut c, "mem", n, 30);
            let seconds = started.elapsed().as_secs_f64();
            let (heap1, rss1, calls1) = (LIVE.load(Ordering::Relaxed), rss_kib(), CALLS.load(Ordering::Relaxed));
            println!(
                "memory: {n} runs x 30 records: heap {:.0} B/run, RSS {:.0} B/run; fill {:.0} ns/event, {:.1} allocations/event",
                (heap1 - heap0) as f64 / n as f64,
                (rss1 - rss0) as f64 * 1024.0 / n as f64,
                seconds * 1e9 / (n * 30) as f64,
                (calls1 - calls0) as f64 / (n * 30) as f64
            );
        }
        "scaling" => {
            let mut c = core(30);
            fill(&mut c, "mem", n, 30);
            let small = spread(1000, 30_000, 3);
            let big = spread(n, 30_000, 3);
            for _ in 0..2 {
                let a = time(&mut c, &small, 60_000, 3);
                let b = time(&mut c, &big, 60_000, 3);
                println!("scaling: spread ns/event: 1k runs {a:.0}, {n} runs {b:.0} (events/s ratio {:.3})", a / b);
            }
        }
        "batch" => {
            let events = traffic("batch", n);
            let count = events.len();
            let data = requests(events, 64);
            // A fresh core per round: a second pass of the same seqs would be answered as retries.
            let mut best = f64::MAX;
            let mut allocations = 0.0;
            for _ in 0..5 {
                let mut c = core(30);
                let calls0 = CALLS.load(Ordering::Relaxed);
                best = best.min(time(&mut c, &data, count, 1));
                allocations = (CALLS.load(Ordering::Relaxed) - calls0) as f64 / count as f64;
            }
            println!("batch64: bench traffic, {count} events: {best:.0} ns/event (best of 5); {allocations:.1} allocations/event");
        }
        "breakdown" => breakdown(n),
        _ => eprintln!("modes: memory [runs] | scaling [runs] | batch [pairs] | breakdown [pairs]"),
    }
}

/// ns and allocations per event of `stage` over the batch traffic (best of 5 rounds).
fn stage(name: &str, count: usize, mut run: impl FnMut()) -> f64 {
    let mut best = f64::MAX;
    let mut allocations = 0.0;
    for _ in 0..5 {
        let calls0 = CALLS.load(Ordering::Relaxed);
        let started = Instant::now();
        run();
        best = best.min(started.elapsed().as_secs_f64() * 1e9 / count as f64);
        allocations = (CALLS.load(Ordering::Relaxed) - calls0) as f64 / count as f64;
    }
    println!("  {name:44} {best:7.0} ns/event {allocations:5.1} allocations/event");
    best
}

/// The batch traffic's per-event work taken apart: each stage alone, then the whole request.
/// The stages overlap the whole (it runs them all, and more); they say where its time goes.
fn breakdown(pairs: usize) {
    use loopwarden_core::fingerprint::{args_digest, outcome_fingerprint, Catalog};
    use loopwarden_core::json::{canonical, decode};
    use loopwarden_core::service::{content_digest, evaluate_response};
    let events = traffic("batch", pairs);
    let count = events.len();
    let data = requests(events, 64);
    let total_bytes: usize = data.iter().map(Vec::len).sum();
    println!("breakdown: {count} events in {} requests of 64, {:.0} request bytes per event", data.len(), total_bytes as f64 / count as f64);
    let probe = core(30);
    let decoded: Vec<Vec<pb::Event>> = data.iter().map(|d| probe.decode_evaluate(d).ok().unwrap()).collect();
    stage("decode with prost (count_events + prost)", count, || {
        for d in &data {
            std::hint::black_box(probe.decode_evaluate(d).ok());
        }
    });
    stage("decode in place (count_events + wire.rs)", count, || {
        for d in &data {
            std::hint::black_box(probe.decode_request(d).ok().map(|e| e.refs().len()));
        }
    });
    stage("retry content digest (whole text)", count, || {
        for e in decoded.iter().flatten() {
            std::hint::black_box(content_digest(&e.kind));
        }
    });
    let texts = || decoded.iter().flatten().filter_map(|e| match &e.kind {
        Some(pb::event::Kind::ToolCall(c)) => Some((c.tool_name.as_str(), c.params_json.as_str(), None)),
        Some(pb::event::Kind::ToolOutcome(o)) => Some((o.tool_name.as_str(), o.params_json.as_str(), match &o.outcome {
            Some(pb::tool_outcome::Outcome::ResultJson(r)) => Some(r.as_str()),
            _ => None,
        })),
        _ => None,
    });
    stage("JSON parse: params (+ result on outcomes)", count, || {
        for (_, params, result) in texts() {
            std::hint::black_box(decode(params, 64).ok());
            if let Some(r) = result {
                std::hint::black_box(decode(r, 64).ok());
            }
        }
    });
    let values: Vec<_> = texts().map(|(t, p, r)| (t, decode(p, 64).unwrap(), r.map(|r| decode(r, 64).unwrap()))).collect();
    stage("canonical JSON only (params + result)", count, || {
        for (_, params, result) in &values {
            std::hint::black_box(canonical(params));
            if let Some(r) = result {
                std::hint::black_box(canonical(r));
            }
        }
    });
    stage("args digest (canonical + sha256), every event", count, || {
        for (tool, params, _) in &values {
            std::hint::black_box(args_digest(tool, params));
        }
    });
    let catalog = Catalog::default();
    stage("outcome fingerprint (canonical + sha256)", count, || {
        for (tool, params, result) in &values {
            if result.is_some() {
                std::hint::black_box(outcome_fingerprint(tool, params, result.as_ref(), None, &catalog, false).digest);
            }
        }
    });
    let mut c = core(30);
    let mut decisions = Vec::new();
    for events in &decoded {
        let mut summary = Summary::default();
        decisions.push(c.evaluate_events(events, "", "", 1000.0, &mut summary));
    }
    stage("response encode", count, || {
        for ds in &decisions {
            std::hint::black_box(evaluate_response(ds));
        }
    });
    let mut best = f64::MAX;
    let mut allocations = 0.0;
    for _ in 0..5 {
        let mut c = core(30);
        let calls0 = CALLS.load(Ordering::Relaxed);
        best = best.min(time(&mut c, &data, count, 1));
        allocations = (CALLS.load(Ordering::Relaxed) - calls0) as f64 / count as f64;
    }
    println!("  {:44} {best:7.0} ns/event {allocations:5.1} allocations/event", "whole request (evaluate_request), fresh core");
}
