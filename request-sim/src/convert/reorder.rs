//! The start-time order of a converted log. A log written as requests complete (LiteLLM's)
//! is out of start order by up to its longest request; `convert` holds each counted request
//! until the newest start read is more than the window (`--reorder-window`) past its own, then
//! numbers and writes it. Memory is bounded by the window: the requests of its last SECS of
//! log time (counted: token block hashes and message hashes; no text unless `--keep-text`).
//! A request earlier than one already written is refused, naming the flag to raise.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// One held item with its start time; ties keep log order (`seq`).
struct Entry<T> {
    time: f64,
    seq: u64,
    item: T,
}

impl<T> PartialEq for Entry<T> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl<T> Eq for Entry<T> {}

impl<T> PartialOrd for Entry<T> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<T> Ord for Entry<T> {
    /// Reversed: the heap's top is the earliest (then the first read).
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .time
            .total_cmp(&self.time)
            .then(other.seq.cmp(&self.seq))
    }
}

/// A request too late for the window: it starts before one already written.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TooLate {
    /// The start of the newest request read, ms.
    pub newest_ms: f64,
    /// The start of the latest request written, ms.
    pub written_ms: f64,
}

/// Items put in start-time order within a window of log time.
pub struct StartOrder<T> {
    window_ms: f64,
    heap: BinaryHeap<Entry<T>>,
    seq: u64,
    newest: f64,
    written: f64,
}

impl<T> StartOrder<T> {
    pub fn new(window_ms: f64) -> StartOrder<T> {
        StartOrder {
            window_ms,
            heap: BinaryHeap::new(),
            seq: 0,
            newest: f64::NEG_INFINITY,
            written: f64::NEG_INFINITY,
        }
    }

    /// Holds `item` (starting at `time` ms); refused when an item already released starts
    /// later.
    pub fn push(&mut self, time: f64, item: T) -> Result<(), TooLate> {
        self.newest = self.newest.max(time);
        if time < self.written {
            return Err(TooLate {
                newest_ms: self.newest,
                written_ms: self.written,
            });
        }
        self.heap.push(Entry {
            time,
            seq: self.seq,
            item,
        });
        self.seq += 1;
        Ok(())
    }

    /// The earliest held item when the newest start read is more than the window past it
    /// (`all`: at the end of the log, any).
    pub fn pop(&mut self, all: bool) -> Option<(f64, T)> {
        let top = self.heap.peek()?;
        if !all && top.time >= self.newest - self.window_ms {
            return None;
        }
        let e = self.heap.pop()?;
        self.written = self.written.max(e.time);
        Some((e.time, e.item))
    }

    /// Items held now.
    pub fn held(&self) -> usize {
        self.heap.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(o: &mut StartOrder<u32>, all: bool) -> Vec<u32> {
        std::iter::from_fn(|| o.pop(all)).map(|(_, i)| i).collect()
    }

    #[test]
    fn items_leave_in_start_order_once_the_window_is_past_them() {
        let mut o = StartOrder::new(10.0);
        o.push(5.0, 1).unwrap();
        o.push(3.0, 2).unwrap();
        o.push(5.0, 3).unwrap();
        assert!(drain(&mut o, false).is_empty());
        o.push(14.0, 4).unwrap();
        // 14 - 10 = 4: only the item at 3 is past the window.
        assert_eq!(drain(&mut o, false), vec![2]);
        o.push(16.0, 5).unwrap();
        // Ties keep the order read.
        assert_eq!(drain(&mut o, false), vec![1, 3]);
        assert_eq!(o.held(), 2);
        assert_eq!(drain(&mut o, true), vec![4, 5]);
    }

    #[test]
    fn an_item_earlier_than_one_written_is_too_late() {
        let mut o = StartOrder::new(10.0);
        o.push(20.0, 1).unwrap();
        o.push(40.0, 2).unwrap();
        assert_eq!(drain(&mut o, false), vec![1]);
        assert_eq!(
            o.push(15.0, 3),
            Err(TooLate {
                newest_ms: 40.0,
                written_ms: 20.0
            })
        );
        // Equal to the one written is in time.
        o.push(20.0, 4).unwrap();
        assert_eq!(drain(&mut o, true), vec![4, 2]);
    }
}
