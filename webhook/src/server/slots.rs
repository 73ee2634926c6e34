//! The connections a listener serves at once, and which one gives way at the bound.
//!
//! One peer address may hold at most its share of the places ([`peer_share`]: all but
//! an eighth, 56 of 64), so that the rest stay open to other addresses however the
//! places are held: a client keeping a request open on every place it can get (a body
//! trickled up to its deadline) cannot keep the apiserver out, and evicting a connection
//! with a request open, which would lose a review, is never needed for that. A peer alone
//! is held to its share too: its connection past it waits until one of its own frees
//! (requests end within the body and drain deadlines; an idle one gives way at once).
//!
//! A connection that finds no place waits in a list of its own (the accept loop goes on,
//! so a connection from another address is never queued behind it in the kernel's
//! backlog), at most four per place (256 for 64): past that, the oldest waiting
//! connection of the peer with the most waiting is closed. A freed place goes to the waiting connection
//! whose peer holds the fewest places (under its share), oldest first.
//!
//! A waiting connection takes the place of an idle one (no request open) instead of
//! waiting for one to end: one of its own peer's, or of a peer holding more places than
//! its own (never of one holding as many or fewer, so that a client holding most places
//! with slow requests cannot churn the others' connections out); of the peer holding the
//! most places first, among those first one that never sent a request (a TLS handshake
//! or a request head still coming, an HTTP/2 preface and nothing else), oldest first,
//! then the one idle longest. So connections that merely sit cannot keep the apiserver
//! or the probes out.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, watch};
use tokio::time::Instant;

/// The places of `bound` that one peer address may hold: all but an eighth, rounded up
/// (56 of 64, 14 of 16), and at least one.
pub(super) fn peer_share(bound: usize) -> usize {
    bound.saturating_sub(bound.div_ceil(8)).max(1)
}

/// Connections that may wait for a place, per place: what the kernel's backlog (1024)
/// would hold for the default bound, each a socket and a small task before any TLS. A
/// client whose waiting connections were closed at once would retry at once.
const WAITING_PER_PLACE: usize = 4;

/// The places of one listener.
#[derive(Debug)]
pub(super) struct Slots {
    bound: usize,
    share: usize,
    table: Mutex<Table>,
}

#[derive(Debug, Default)]
struct Table {
    next: u64,
    places: HashMap<u64, Entry>,
    /// Connections waiting for a place, by arrival (the id their place will have).
    waiting: BTreeMap<u64, Waiter>,
}

#[derive(Debug)]
struct Entry {
    peer: IpAddr,
    open: usize,
    requested: bool,
    /// Accepted, or last request ended.
    since: Instant,
    evicting: bool,
    evict: Arc<Notify>,
}

#[derive(Debug)]
struct Waiter {
    peer: IpAddr,
    /// Its place is in the table, to be taken up.
    granted: bool,
    wake: Arc<Notify>,
}

impl Slots {
    pub(super) fn new(bound: usize) -> Arc<Self> {
        let bound = bound.max(1);
        Arc::new(Self {
            bound,
            share: peer_share(bound),
            table: Mutex::default(),
        })
    }

    fn table(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Accepts a connection, backing off when accepting fails. Cancel-safe.
    pub(super) async fn accept(listener: &TcpListener) -> (TcpStream, SocketAddr) {
        loop {
            match listener.accept().await {
                Ok(accepted) => return accepted,
                Err(error) => {
                    // Out of file descriptors and the like: back off, don't spin.
                    tracing::warn!("accept failed: {error}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    }

    /// Waits for a place for a connection from `peer`, making one where an idle
    /// connection may give way; `None` when it was closed from the waiting list.
    /// Cancel-safe: a connection no longer waiting leaves the list.
    pub(super) async fn place(self: &Arc<Self>, peer: IpAddr) -> Option<Slot> {
        let wake = Arc::new(Notify::new());
        let id = {
            let mut table = self.table();
            let id = table.next;
            table.next += 1;
            let waiter = Waiter {
                peer,
                granted: false,
                wake: wake.clone(),
            };
            table.waiting.insert(id, waiter);
            table.bound_waiting(WAITING_PER_PLACE * self.bound);
            table.assign(self.bound, self.share);
            id
        };
        let mut waiting = Waiting { slots: self, id };
        loop {
            {
                let mut table = self.table();
                match table.waiting.get(&id) {
                    None => return None,
                    Some(waiter) if waiter.granted => {
                        table.waiting.remove(&id);
                        waiting.id = u64::MAX; // taken up: nothing to undo
                        let evict = table.places.get(&id).map(|e| e.evict.clone()).unwrap_or_default();
                        return Some(self.slot(id, evict));
                    }
                    Some(_) => {}
                }
            }
            wake.notified().await;
        }
    }

    fn slot(self: &Arc<Self>, id: u64, evict: Arc<Notify>) -> Slot {
        Slot(Arc::new(Place {
            slots: self.clone(),
            id,
            evict,
            requested: AtomicBool::new(false),
            open: watch::channel(0).0,
        }))
    }

    /// Connections holding a place.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.table().places.len()
    }
}

/// A connection's turn in the waiting list; leaving it (cancelled) gives back a place
/// already granted.
struct Waiting<'a> {
    slots: &'a Arc<Slots>,
    id: u64,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        let mut table = self.slots.table();
        if table.waiting.remove(&self.id).is_some() {
            table.places.remove(&self.id);
            table.assign(self.slots.bound, self.slots.share);
        }
    }
}

impl Table {
    /// Places held by each peer address.
    fn held(&self) -> HashMap<IpAddr, usize> {
        let mut held: HashMap<IpAddr, usize> = HashMap::new();
        for entry in self.places.values() {
            *held.entry(entry.peer).or_default() += 1;
        }
        held
    }

    /// Over `bound` connections waiting: closes the oldest of the peer with the most
    /// waiting (then holding the most places).
    fn bound_waiting(&mut self, bound: usize) {
        let mut counts: HashMap<IpAddr, usize> = HashMap::new();
        for waiter in self.waiting.values().filter(|w| !w.granted) {
            *counts.entry(waiter.peer).or_default() += 1;
        }
        if counts.values().sum::<usize>() <= bound {
            return;
        }
        let held = self.held();
        let Some(peer) = counts
            .iter()
            .max_by_key(|(peer, n)| (**n, held.get(*peer).copied().unwrap_or(0)))
            .map(|(peer, _)| *peer)
        else {
            return;
        };
        let oldest = self
            .waiting
            .iter()
            .find(|(_, w)| w.peer == peer && !w.granted)
            .map(|(id, _)| *id);
        if let Some(waiter) = oldest.and_then(|id| self.waiting.remove(&id)) {
            waiter.wake.notify_one();
            tracing::debug!(%peer, "{bound} connections waiting for a place: closing the oldest of this peer's");
        }
    }

    /// Gives free places to waiting connections, the one whose peer holds the fewest
    /// places (under `share`) first, oldest first; then, if connections still wait and
    /// none is on its way out, tells one idle connection to give way to the first of them
    /// it may give way to. Called whenever a place, a request or the waiting list
    /// changes.
    fn assign(&mut self, bound: usize, share: usize) {
        if self.waiting.values().all(|w| w.granted) {
            return;
        }
        let mut held = self.held();
        while self.places.len() < bound {
            let holds = |peer: &IpAddr| held.get(peer).copied().unwrap_or(0);
            let Some((&id, waiter)) = self
                .waiting
                .iter_mut()
                .filter(|(_, w)| !w.granted && holds(&w.peer) < share)
                .min_by_key(|(id, w)| (holds(&w.peer), **id))
            else {
                break;
            };
            waiter.granted = true;
            waiter.wake.notify_one();
            *held.entry(waiter.peer).or_default() += 1;
            let entry = Entry {
                peer: waiter.peer,
                open: 0,
                requested: false,
                since: Instant::now(),
                evicting: false,
                evict: Arc::new(Notify::new()),
            };
            self.places.insert(id, entry);
        }
        // One idle connection on its way out at a time; one that took a request
        // meanwhile no longer counts.
        if self.places.values().any(|e| e.evicting && e.open == 0) {
            return;
        }
        let holds = |peer: &IpAddr| held.get(peer).copied().unwrap_or(0);
        // Each waiting peer once, in the order places are given.
        let mut seen = HashSet::new();
        let mut newcomers: Vec<(IpAddr, u64)> = (self.waiting.iter())
            .filter(|(_, w)| !w.granted && seen.insert(w.peer))
            .map(|(id, w)| (w.peer, *id))
            .collect();
        newcomers.sort_by_key(|(peer, id)| (holds(peer) >= share, holds(peer), *id));
        for (newcomer, _) in newcomers {
            let newcomer_holds = holds(&newcomer);
            let under_share = newcomer_holds < share;
            let victim = self
                .places
                .values_mut()
                .filter(|e| e.open == 0 && !e.evicting)
                .filter(|e| e.peer == newcomer || (under_share && holds(&e.peer) > newcomer_holds))
                .min_by_key(|e| (std::cmp::Reverse(holds(&e.peer)), e.requested, e.since));
            if let Some(victim) = victim {
                victim.evicting = true;
                victim.evict.notify_one();
                tracing::debug!(peer = %victim.peer, "no place for a connection from {newcomer} ({bound} at most, {share} for one address): closing an idle connection");
                return;
            }
        }
    }
}

/// A connection's place, held until it closes (all clones dropped); also counts its open
/// requests.
#[derive(Debug, Clone)]
pub(super) struct Slot(Arc<Place>);

#[derive(Debug)]
struct Place {
    slots: Arc<Slots>,
    id: u64,
    evict: Arc<Notify>,
    requested: AtomicBool,
    open: watch::Sender<usize>,
}

impl Drop for Place {
    fn drop(&mut self) {
        let mut table = self.slots.table();
        table.places.remove(&self.id);
        table.assign(self.slots.bound, self.slots.share);
    }
}

/// One open request; ends when dropped.
#[derive(Debug)]
pub(super) struct OpenRequest(Slot);

impl Slot {
    /// A request started on the connection.
    pub(super) fn start(&self) -> OpenRequest {
        self.0.requested.store(true, Ordering::Relaxed);
        let slots = &self.0.slots;
        let mut table = slots.table();
        if let Some(entry) = table.places.get_mut(&self.0.id) {
            entry.open += 1;
            entry.requested = true;
            // It was giving way: another idle connection may now have to.
            if entry.evicting {
                table.assign(slots.bound, slots.share);
            }
        }
        drop(table);
        self.0.open.send_modify(|n| *n += 1);
        OpenRequest(self.clone())
    }

    /// Whether a request ever started on the connection.
    pub(super) fn requested(&self) -> bool {
        self.0.requested.load(Ordering::Relaxed)
    }

    /// Completes when a new connection needs this one's place.
    pub(super) async fn evicted(&self) {
        self.0.evict.notified().await;
    }

    /// Completes at `deadline` if no request has started by then; never otherwise.
    pub(super) async fn no_request_by(&self, deadline: Instant) {
        tokio::time::sleep_until(deadline).await;
        if self.requested() {
            std::future::pending::<()>().await;
        }
    }

    /// Completes once no request has been open for `period`.
    pub(super) fn idle_for(&self, period: Duration) -> impl Future<Output = ()> + Send + 'static {
        let mut count = self.0.open.subscribe();
        async move {
            loop {
                if count.wait_for(|open| *open == 0).await.is_err() {
                    return std::future::pending().await;
                }
                match tokio::time::timeout(period, count.changed()).await {
                    Err(_) => return,
                    Ok(Ok(())) => {}
                    Ok(Err(_)) => return std::future::pending().await,
                }
            }
        }
    }
}

impl Drop for OpenRequest {
    fn drop(&mut self) {
        let place = &(self.0).0;
        place.open.send_modify(|n| *n = n.saturating_sub(1));
        let slots = &place.slots;
        let mut table = slots.table();
        if let Some(entry) = table.places.get_mut(&place.id) {
            entry.open = entry.open.saturating_sub(1);
            entry.since = Instant::now();
            // Idle now: it may give way to a waiting connection.
            if entry.open == 0 {
                table.assign(slots.bound, slots.share);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn evicted_soon(slot: &Slot) -> bool {
        tokio::time::timeout(Duration::from_millis(300), slot.evicted())
            .await
            .is_ok()
    }

    /// A place for a connection from `peer`, which must be had within a second.
    async fn placed(slots: &Arc<Slots>, peer: IpAddr) -> Slot {
        tokio::time::timeout(Duration::from_secs(1), slots.place(peer))
            .await
            .expect("no place within a second")
            .expect("closed from the waiting list")
    }

    /// A connection from `peer` waiting for a place.
    fn waiting(slots: &Arc<Slots>, peer: IpAddr) -> tokio::task::JoinHandle<Option<Slot>> {
        let slots = slots.clone();
        tokio::spawn(async move { slots.place(peer).await })
    }

    async fn got_place(waiting: &mut tokio::task::JoinHandle<Option<Slot>>) -> Option<Slot> {
        tokio::time::timeout(Duration::from_secs(1), waiting)
            .await
            .expect("still waiting after a second")
            .expect("the placing task")
    }

    async fn still_waiting(waiting: &mut tokio::task::JoinHandle<Option<Slot>>) -> bool {
        tokio::time::sleep(Duration::from_millis(300)).await;
        !waiting.is_finished()
    }

    const A: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 1));
    const B: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 2));
    const C: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 3));

    #[test]
    fn one_address_may_hold_all_but_an_eighth() {
        let shares: Vec<_> = [1, 2, 3, 8, 9, 16, 64, 512].map(peer_share).into();
        assert_eq!(shares, [1, 1, 2, 7, 7, 14, 56, 448]);
    }

    #[tokio::test]
    async fn one_peer_holding_its_share_with_requests_open_leaves_the_rest_to_others() {
        // Issue 24 D8: slow bodies from A on every place A can get; B must not wait for
        // one of them to end.
        let slots = Slots::new(8);
        let mut held = Vec::new();
        for _ in 0..peer_share(8) {
            let slot = placed(&slots, A).await;
            held.push((slot.start(), slot));
        }
        let mut more = waiting(&slots, A);
        assert!(
            still_waiting(&mut more).await,
            "A took a place past its share of {}",
            peer_share(8)
        );
        let theirs = placed(&slots, B).await;
        assert_eq!(slots.len(), 8);
        assert!(
            !evicted_soon(&held[0].1).await,
            "a connection with a request open gave way"
        );
        // One of A's requests ends: its connection gives way to A's waiting one, and
        // A stays within its share.
        let (request, slot) = held.pop().expect("a held place");
        drop(request);
        assert!(evicted_soon(&slot).await);
        drop(slot);
        let _again = got_place(&mut more).await.expect("A's waiting connection placed");
        assert_eq!(slots.len(), 8);
        drop(theirs);
    }

    #[tokio::test]
    async fn a_freed_place_goes_to_the_waiting_peer_holding_the_fewest() {
        let slots = Slots::new(4);
        let mut held = Vec::new();
        for peer in [A, A, A, C] {
            let slot = placed(&slots, peer).await;
            held.push((slot.start(), slot));
        }
        let mut from_c = waiting(&slots, C); // older, but C holds one place
        tokio::time::sleep(Duration::from_millis(50)).await;
        let mut from_b = waiting(&slots, B);
        assert!(still_waiting(&mut from_b).await && !from_c.is_finished());
        drop(held.remove(0)); // one of A's connections closes
        let _b = got_place(&mut from_b).await.expect("B placed");
        assert!(
            still_waiting(&mut from_c).await,
            "the place went to C, holding more places than B"
        );
        drop(held.pop()); // C's own ends
        let _c = got_place(&mut from_c).await.expect("C placed");
    }

    #[tokio::test]
    async fn past_the_bound_of_waiting_connections_the_peer_with_most_waiting_loses_its_oldest() {
        // Bound 1: 4 may wait.
        let slots = Slots::new(1);
        let b = placed(&slots, B).await;
        let _request = b.start();
        let mut first = waiting(&slots, A);
        tokio::time::sleep(Duration::from_millis(50)).await;
        let mut second = waiting(&slots, A);
        let _more = (waiting(&slots, A), waiting(&slots, B));
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!first.is_finished(), "four waiting, the bound: none closed");
        let from_b = waiting(&slots, B);
        assert!(
            got_place(&mut first).await.is_none(),
            "A's oldest waiting connection was kept"
        );
        assert!(still_waiting(&mut second).await && !from_b.is_finished());
    }

    #[tokio::test]
    async fn a_connection_that_stops_waiting_gives_back_its_place() {
        let slots = Slots::new(1);
        let only = placed(&slots, A).await;
        let request = only.start();
        let mut gone = waiting(&slots, B);
        assert!(still_waiting(&mut gone).await);
        gone.abort();
        let mut next = waiting(&slots, B);
        drop((request, only));
        let _next = got_place(&mut next).await.expect("the freed place given");
        assert_eq!(slots.len(), 1);
    }

    #[tokio::test]
    async fn at_the_bound_the_oldest_connection_that_never_asked_gives_way() {
        // Bound 4: A may hold 3.
        let slots = Slots::new(4);
        let used = placed(&slots, A).await;
        drop(used.start()); // asked once, idle since
        let old = placed(&slots, A).await;
        let new = placed(&slots, A).await;
        let mut fourth = waiting(&slots, A);
        assert!(
            evicted_soon(&old).await,
            "the oldest connection that never asked was kept"
        );
        assert!(!evicted_soon(&used).await);
        assert!(!evicted_soon(&new).await);
        drop(old);
        let fourth = got_place(&mut fourth).await.expect("placed");
        assert_eq!(slots.len(), 3);
        drop((used, new, fourth));
        assert_eq!(slots.len(), 0);
    }

    #[tokio::test]
    async fn connections_with_a_request_open_are_not_evicted() {
        let slots = Slots::new(2);
        let (a, b) = (placed(&slots, A).await, placed(&slots, B).await);
        let (ra, rb) = (a.start(), b.start());
        let mut more = waiting(&slots, B);
        assert!(!evicted_soon(&a).await && !evicted_soon(&b).await);
        assert!(!more.is_finished());
        drop(rb); // b is idle now: it gives way
        assert!(evicted_soon(&b).await);
        drop(b);
        let _c = got_place(&mut more).await.expect("placed");
        drop(ra);
    }

    #[tokio::test]
    async fn a_peer_holding_more_places_does_not_take_another_peers() {
        // Slow bodies from B hold two of three places; A's new connection is idle (its
        // handshake under way). B's next connection waits: it must not evict A's.
        let slots = Slots::new(3);
        let (b1, b2) = (placed(&slots, B).await, placed(&slots, B).await);
        let (r1, r2) = (b1.start(), b2.start());
        let mine = placed(&slots, A).await;
        let mut more = waiting(&slots, B);
        assert!(
            !evicted_soon(&mine).await,
            "a connection of the peer holding the most places took another peer's place"
        );
        assert!(!more.is_finished());
        // B's own idle connection still gives way to B's new one.
        drop(r2);
        assert!(evicted_soon(&b2).await);
        drop(b2);
        let _b3 = got_place(&mut more)
            .await
            .expect("B's new connection placed once B's idle one gave way");
        drop((r1, b1, mine));
    }

    #[tokio::test]
    async fn the_peer_holding_the_most_places_gives_way_first() {
        let slots = Slots::new(4);
        let mine = placed(&slots, A).await; // oldest, never asked
        let (b1, b2, b3) = (
            placed(&slots, B).await,
            placed(&slots, B).await,
            placed(&slots, B).await,
        );
        let mut more = waiting(&slots, C);
        assert!(evicted_soon(&b1).await, "the peer with three places kept them");
        assert!(!evicted_soon(&mine).await);
        drop(b1);
        let _c = got_place(&mut more).await.expect("placed");
        drop((b2, b3));
    }
}
