//! A tiny data-parallel map over the machine's cores, in order.

use std::num::NonZeroUsize;
use std::thread;

/// `items.iter().map(f).collect()`, spread over the available cores. The
/// output order is the input order, whatever the scheduling.
pub fn map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let threads = thread::available_parallelism().map_or(1, NonZeroUsize::get);
    if threads <= 1 || items.len() < 2 {
        return items.iter().map(f).collect();
    }
    let chunk = items.len().div_ceil(threads);
    thread::scope(|s| {
        let f = &f;
        let handles: Vec<_> = items
            .chunks(chunk)
            .map(|c| s.spawn(move || c.iter().map(f).collect::<Vec<R>>()))
            .collect();
        join_in_order(handles)
    })
}

/// `items.into_iter().map(f).collect()`, spread over the available cores
/// like [`map`], for work that takes its item by value.
pub fn map_owned<T: Send, R: Send>(items: Vec<T>, f: impl Fn(T) -> R + Sync) -> Vec<R> {
    let threads = thread::available_parallelism().map_or(1, NonZeroUsize::get);
    if threads <= 1 || items.len() < 2 {
        return items.into_iter().map(f).collect();
    }
    let chunk = items.len().div_ceil(threads);
    let mut chunks = Vec::with_capacity(threads);
    let mut items = items.into_iter();
    loop {
        let c: Vec<T> = items.by_ref().take(chunk).collect();
        if c.is_empty() {
            break;
        }
        chunks.push(c);
    }
    thread::scope(|s| {
        let f = &f;
        let handles: Vec<_> = chunks
            .into_iter()
            .map(|c| s.spawn(move || c.into_iter().map(f).collect::<Vec<R>>()))
            .collect();
        join_in_order(handles)
    })
}

fn join_in_order<R>(handles: Vec<thread::ScopedJoinHandle<'_, Vec<R>>>) -> Vec<R> {
    handles
        .into_iter()
        .flat_map(|h| match h.join() {
            Ok(v) => v,
            // Re-raise a worker's panic on this thread, as a serial map would.
            Err(payload) => std::panic::resume_unwind(payload),
        })
        .collect()
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
    }
}
