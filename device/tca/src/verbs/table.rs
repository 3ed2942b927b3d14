//! A table of objects named by handles that are not reused immediately.
//!
//! A handle is `generation << index_bits | index`. Freed slots go to the back
//! of a FIFO free list and their generation advances, so a stale handle
//! names nothing until the slot has been reused `2^gen_bits - 1` times.
//! Generations start at 1, so no handle is 0. Each object also counts its
//! users (objects that name it); it cannot be removed while it has any.

use std::collections::VecDeque;

use super::VerbsError;

struct Slot<T> {
    generation: u32,
    users: u32,
    value: Option<T>,
}

/// Objects of type `T` behind generation-checked handles.
pub struct HandleTable<T> {
    slots: Vec<Slot<T>>,
    free: VecDeque<u32>,
    capacity: usize,
    index_bits: u32,
    gen_mask: u32,
}

impl<T> HandleTable<T> {
    /// A table of at most `capacity` objects (clamped to `2^index_bits`)
    /// whose handles fit in `handle_bits` bits (at most 32).
    pub fn new(capacity: usize, index_bits: u32, handle_bits: u32) -> Self {
        let index_bits = index_bits.min(handle_bits.saturating_sub(1)).min(30);
        let gen_bits = handle_bits.min(32) - index_bits;
        HandleTable {
            slots: Vec::new(),
            free: VecDeque::new(),
            capacity: capacity.min(1 << index_bits),
            index_bits,
            gen_mask: if gen_bits >= 32 {
                u32::MAX
            } else {
                (1 << gen_bits) - 1
            },
        }
    }

    /// The most objects the table holds.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    fn handle(&self, index: usize) -> u32 {
        (self.slots[index].generation << self.index_bits) | index as u32
    }

    fn index(&self, handle: u32) -> Option<usize> {
        let index = (handle & ((1 << self.index_bits) - 1)) as usize;
        let generation = handle >> self.index_bits;
        let slot = self.slots.get(index)?;
        (slot.generation == generation && slot.value.is_some()).then_some(index)
    }

    /// Stores `value` and returns its handle, or `NoMemory` when full.
    pub fn insert(&mut self, value: T) -> Result<u32, VerbsError> {
        let index = match self.free.pop_front() {
            Some(i) => i as usize,
            None if self.slots.len() < self.capacity => {
                self.slots.push(Slot {
                    generation: 1,
                    users: 0,
                    value: None,
                });
                self.slots.len() - 1
            }
            None => return Err(VerbsError::NoMemory),
        };
        let slot = &mut self.slots[index];
        slot.value = Some(value);
        slot.users = 0;
        Ok(self.handle(index))
    }

    /// The object named by `handle`.
    pub fn get(&self, handle: u32) -> Option<&T> {
        let i = self.index(handle)?;
        self.slots[i].value.as_ref()
    }

    /// The object named by `handle`, mutably.
    pub fn get_mut(&mut self, handle: u32) -> Option<&mut T> {
        let i = self.index(handle)?;
        self.slots[i].value.as_mut()
    }

    /// True when `handle` names a live object.
    pub fn contains(&self, handle: u32) -> bool {
        self.index(handle).is_some()
    }

    /// Counts one more user of `handle`.
    pub fn hold(&mut self, handle: u32) -> Result<(), VerbsError> {
        let i = self.index(handle).ok_or(VerbsError::NotFound)?;
        self.slots[i].users = self.slots[i].users.saturating_add(1);
        Ok(())
    }

    /// Counts one user of `handle` less.
    pub fn release(&mut self, handle: u32) {
        if let Some(i) = self.index(handle) {
            self.slots[i].users = self.slots[i].users.saturating_sub(1);
        }
    }

    /// Number of users of `handle` (0 when it names nothing).
    pub fn users(&self, handle: u32) -> u32 {
        self.index(handle).map_or(0, |i| self.slots[i].users)
    }

    /// Removes the object: `NotFound` for a stale handle, `Busy` while it
    /// has users.
    pub fn remove(&mut self, handle: u32) -> Result<T, VerbsError> {
        let i = self.index(handle).ok_or(VerbsError::NotFound)?;
        if self.slots[i].users > 0 {
            return Err(VerbsError::Busy);
        }
        let slot = &mut self.slots[i];
        let value = slot.value.take().ok_or(VerbsError::NotFound)?;
        slot.generation = match slot.generation.wrapping_add(1) & self.gen_mask {
            0 => 1,
            g => g,
        };
        self.free.push_back(i as u32);
        Ok(value)
    }

    /// Live objects and their handles.
    pub fn iter(&self) -> impl Iterator<Item = (u32, &T)> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.value.as_ref().map(|v| (self.handle(i), v)))
    }

    /// Live objects and their handles, mutably.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (u32, &mut T)> {
        let bits = self.index_bits;
        self.slots.iter_mut().enumerate().filter_map(move |(i, s)| {
            let h = (s.generation << bits) | i as u32;
            s.value.as_mut().map(|v| (h, v))
        })
    }

    /// Number of live objects.
    pub fn len(&self) -> usize {
        self.slots.iter().filter(|s| s.value.is_some()).count()
    }

    /// True when no object is live.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_are_not_reused_immediately() {
        let mut t = HandleTable::new(2, 4, 24);
        let a = t.insert("a").unwrap();
        let b = t.insert("b").unwrap();
        assert_ne!(a, 0);
        assert_eq!(t.insert("c"), Err(VerbsError::NoMemory));
        t.remove(a).unwrap();
        let c = t.insert("c").unwrap();
        assert_ne!(c, a, "same slot, new generation");
        assert_eq!(t.get(a), None);
        assert_eq!(t.get(c), Some(&"c"));
        assert_eq!(t.remove(a), Err(VerbsError::NotFound));
        assert_eq!(t.get(b), Some(&"b"));
        assert!(c < 1 << 24);
    }

    #[test]
    fn users_block_removal() {
        let mut t = HandleTable::new(4, 4, 24);
        let a = t.insert(1).unwrap();
        t.hold(a).unwrap();
        assert_eq!(t.users(a), 1);
        assert_eq!(t.remove(a), Err(VerbsError::Busy));
        t.release(a);
        assert_eq!(t.remove(a), Ok(1));
        assert_eq!(t.hold(a), Err(VerbsError::NotFound));
    }

    #[test]
    fn generation_wraps_without_reaching_zero() {
        let mut t = HandleTable::new(1, 2, 4); // 2 generation bits
        let mut seen = Vec::new();
        for _ in 0..7 {
            let h = t.insert(()).unwrap();
            assert_ne!(h >> 2, 0);
            seen.push(h);
            t.remove(h).unwrap();
        }
        assert_eq!(seen[0], seen[3], "3 generations, then a repeat");
        assert!(t.is_empty());
        for h in [0, u32::MAX, 0xdead_beef] {
            assert!(t.get(h).is_none());
        }
    }
}
