//! In-process figures for the core alone (no gRPC, no Python): live heap bytes per run and
//! per-event time, on the traffic shapes of bench/grpc_bench.py.
//!
//!   cargo run --release --example corebench -- memory [runs]     heap + RSS per run, 30 records
//!   cargo run --release --example corebench -- scaling [runs]    spread ns/event, 1k vs `runs` runs
//!   cargo run --release --example corebench -- batch [pairs]     bench traffic, batches of 64
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
        _ => eprintln!("modes: memory [runs] | scaling [runs] | batch [pairs]"),
    }
}
