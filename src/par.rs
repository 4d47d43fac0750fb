//! A tiny data-parallel map over the machine's cores, in order.
//!
//! The items are cut into blocks, a few per core, and each thread (the
//! caller's too) takes the next block whenever it is free: a thread that
//! another program preempts, or whose items cost more, holds up the map by
//! one block, not by half the items.

use std::num::NonZeroUsize;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;

/// Blocks per thread: enough to even out the threads, few enough that
/// taking one costs nothing beside its items.
const BLOCKS: usize = 8;

/// Asked once: on Linux each answer reads the cgroup's CPU quota (three
/// files), and an edit's build maps a dozen times, mostly over one item.
fn threads() -> usize {
    static THREADS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *THREADS.get_or_init(|| thread::available_parallelism().map_or(1, NonZeroUsize::get))
}

/// `items.iter().map(f).collect()`, spread over the available cores. The
/// output order is the input order, whatever the scheduling.
pub fn map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    if items.len() < 2 || threads() <= 1 {
        return items.iter().map(f).collect();
    }
    let threads = threads();
    let blocks: Vec<&[T]> = items
        .chunks(items.len().div_ceil(threads * BLOCKS))
        .collect();
    run(blocks.len(), threads, |i| {
        blocks[i].iter().map(&f).collect::<Vec<R>>()
    })
}

/// `items.into_iter().map(f).collect()`, spread over the available cores
/// like [`map`], for work that takes its item by value.
pub fn map_owned<T: Send, R: Send>(items: Vec<T>, f: impl Fn(T) -> R + Sync) -> Vec<R> {
    if items.len() < 2 || threads() <= 1 {
        return items.into_iter().map(f).collect();
    }
    let threads = threads();
    let size = items.len().div_ceil(threads * BLOCKS);
    let mut blocks = Vec::with_capacity(threads * BLOCKS);
    let mut items = items.into_iter();
    loop {
        let block: Vec<T> = items.by_ref().take(size).collect();
        if block.is_empty() {
            break;
        }
        blocks.push(Mutex::new(block));
    }
    run(blocks.len(), threads, |i| {
        // Each block is taken once: its index is handed out once.
        let block = blocks[i]
            .lock()
            .map(|mut b| std::mem::take(&mut *b))
            .unwrap_or_default();
        block.into_iter().map(&f).collect::<Vec<R>>()
    })
}

/// `work(i)` for every block `i` below `n`, on `threads` threads (this one
/// among them), each taking the next block when free; the results
/// flattened in block order.
fn run<R: Send>(n: usize, threads: usize, work: impl Fn(usize) -> Vec<R> + Sync) -> Vec<R> {
    let next = AtomicUsize::new(0);
    let worker = || {
        let mut done = Vec::new();
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            if i >= n {
                return done;
            }
            done.push((i, work(i)));
        }
    };
    let mut done = thread::scope(|s| {
        let handles: Vec<_> = (1..threads.min(n)).map(|_| s.spawn(worker)).collect();
        let mut done = worker();
        for h in handles {
            match h.join() {
                Ok(d) => done.extend(d),
                // Re-raise a worker's panic on this thread, as a serial map
                // would.
                Err(payload) => std::panic::resume_unwind(payload),
            }
        }
        done
    });
    done.sort_unstable_by_key(|(i, _)| *i);
    done.into_iter().flat_map(|(_, r)| r).collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn keeps_order() {
        let v: Vec<u32> = (0..1000).collect();
        assert_eq!(
            super::map(&v, |x| x * 2),
            v.iter().map(|x| x * 2).collect::<Vec<_>>()
        );
        assert!(super::map(&[] as &[u32], |x| *x).is_empty());
        let owned: Vec<String> = (0..1000).map(|i| i.to_string()).collect();
        assert_eq!(
            super::map_owned(owned.clone(), |s| s + "!"),
            owned.iter().map(|s| format!("{s}!")).collect::<Vec<_>>()
        );
        assert!(super::map_owned(Vec::<u32>::new(), |x| x).is_empty());
        // Items of very different cost, fewer than the blocks could be.
        let v: Vec<u64> = (0..37).collect();
        let slow = |x: &u64| {
            if x.is_multiple_of(5) {
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            x + 1
        };
        assert_eq!(super::map(&v, slow), (1..38).collect::<Vec<u64>>());
    }

    #[test]
    #[should_panic(expected = "item 7")]
    fn a_panic_reaches_the_caller() {
        let v: Vec<u32> = (0..100).collect();
        super::map(&v, |&x| assert!(x != 7, "item {x}"));
    }
}
