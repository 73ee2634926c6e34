//! The connections a listener serves at once, and which one gives way at the bound.
//!
//! At the bound, a new connection takes the place of an idle one (no request open)
//! instead of waiting: one of the peer address holding the most places, so that a
//! client opening connections as fast as it can churns its own rather than the
//! apiserver's or the kubelet's; among those, first one that never sent a request (a TLS
//! handshake or a request head still coming, an HTTP/2 preface and nothing else), oldest
//! first, then the one idle longest; never one of another peer holding no more places
//! than the new connection's peer, so that a client holding most places with slow
//! requests cannot churn the others' connections out. Only when no connection may give
//! way does the new one wait, and requests are bounded in time by the body and drain
//! deadlines. So connections that merely sit cannot keep the apiserver or the probes out.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, watch};
use tokio::time::Instant;

/// How often a connection waiting for a place looks again (a place is also announced
/// when it frees; this covers an evicted connection that took a request meanwhile).
const RECHECK: Duration = Duration::from_millis(100);

/// The places of one listener.
#[derive(Debug)]
pub(super) struct Slots {
    bound: usize,
    table: Mutex<Table>,
    /// A place freed, or a connection went idle at the bound.
    changed: Notify,
}

#[derive(Debug, Default)]
struct Table {
    next: u64,
    places: HashMap<u64, Entry>,
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

impl Slots {
    pub(super) fn new(bound: usize) -> Arc<Self> {
        Arc::new(Self {
            bound: bound.max(1),
            table: Mutex::default(),
            changed: Notify::new(),
        })
    }

    fn table(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Accepts a connection and finds it a place, evicting an idle connection at the
    /// bound. Not cancel-safe once a connection is accepted: keep the future across
    /// polls.
    pub(super) async fn accept(self: &Arc<Self>, listener: &TcpListener) -> (Slot, TcpStream, SocketAddr) {
        let (tcp, peer) = loop {
            match listener.accept().await {
                Ok(accepted) => break accepted,
                Err(error) => {
                    // Out of file descriptors and the like: back off, don't spin.
                    tracing::warn!("accept failed: {error}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        };
        (self.place(peer.ip()).await, tcp, peer)
    }

    async fn place(self: &Arc<Self>, peer: IpAddr) -> Slot {
        loop {
            let changed = self.changed.notified();
            {
                let mut table = self.table();
                if table.places.len() < self.bound {
                    return self.insert(&mut table, peer);
                }
                // One idle connection on its way out at a time; one that took a request
                // meanwhile no longer counts.
                if !table.places.values().any(|e| e.evicting && e.open == 0) {
                    table.evict_one(self.bound, peer);
                }
            }
            let _ = tokio::time::timeout(RECHECK, changed).await;
        }
    }

    fn insert(self: &Arc<Self>, table: &mut Table, peer: IpAddr) -> Slot {
        let id = table.next;
        table.next += 1;
        let evict = Arc::new(Notify::new());
        table.places.insert(
            id,
            Entry {
                peer,
                open: 0,
                requested: false,
                since: Instant::now(),
                evicting: false,
                evict: evict.clone(),
            },
        );
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

impl Table {
    /// Tells the idle connection first in the eviction order to give way to one from
    /// `newcomer`: of the peer address holding the most places, never asked anything
    /// first, then idle longest; one of another peer only if that peer holds more places
    /// than `newcomer` does.
    fn evict_one(&mut self, bound: usize, newcomer: IpAddr) {
        let mut held: HashMap<IpAddr, usize> = HashMap::new();
        for entry in self.places.values() {
            *held.entry(entry.peer).or_default() += 1;
        }
        let newcomer_holds = held.get(&newcomer).copied().unwrap_or(0);
        let victim = self
            .places
            .values_mut()
            .filter(|e| e.open == 0 && !e.evicting)
            .filter(|e| e.peer == newcomer || held[&e.peer] > newcomer_holds)
            .min_by_key(|e| (std::cmp::Reverse(held[&e.peer]), e.requested, e.since));
        if let Some(victim) = victim {
            victim.evicting = true;
            victim.evict.notify_one();
            tracing::debug!(peer = %victim.peer, "at the connection bound ({bound}): closing an idle connection");
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
        self.slots.table().places.remove(&self.id);
        self.slots.changed.notify_one();
    }
}

/// One open request; ends when dropped.
#[derive(Debug)]
pub(super) struct OpenRequest(Slot);

impl Slot {
    /// A request started on the connection.
    pub(super) fn start(&self) -> OpenRequest {
        self.0.requested.store(true, Ordering::Relaxed);
        if let Some(entry) = self.0.slots.table().places.get_mut(&self.0.id) {
            entry.open += 1;
            entry.requested = true;
        }
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
        let mut table = place.slots.table();
        let at_bound = table.places.len() >= place.slots.bound;
        if let Some(entry) = table.places.get_mut(&place.id) {
            entry.open = entry.open.saturating_sub(1);
            entry.since = Instant::now();
        }
        drop(table);
        if at_bound {
            place.slots.changed.notify_one();
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

    const A: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 1));
    const B: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 2));

    #[tokio::test]
    async fn at_the_bound_the_oldest_connection_that_never_asked_gives_way() {
        let slots = Slots::new(3);
        let used = slots.place(A).await;
        drop(used.start()); // asked once, idle since
        let old = slots.place(A).await;
        let new = slots.place(A).await;
        let waiting = tokio::spawn({
            let slots = slots.clone();
            async move { slots.place(A).await }
        });
        assert!(
            evicted_soon(&old).await,
            "the oldest connection that never asked was kept"
        );
        assert!(!evicted_soon(&used).await);
        assert!(!evicted_soon(&new).await);
        drop(old);
        let fourth = tokio::time::timeout(Duration::from_secs(1), waiting)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(slots.len(), 3);
        drop((used, new, fourth));
        assert_eq!(slots.len(), 0);
    }

    #[tokio::test]
    async fn connections_with_a_request_open_are_not_evicted() {
        let slots = Slots::new(2);
        let (a, b) = (slots.place(A).await, slots.place(A).await);
        let (ra, rb) = (a.start(), b.start());
        let waiting = tokio::spawn({
            let slots = slots.clone();
            async move { slots.place(A).await }
        });
        assert!(!evicted_soon(&a).await && !evicted_soon(&b).await);
        assert!(!waiting.is_finished());
        drop(rb); // b is idle now: it gives way
        assert!(evicted_soon(&b).await);
        drop(b);
        let _c = tokio::time::timeout(Duration::from_secs(1), waiting)
            .await
            .unwrap()
            .unwrap();
        drop(ra);
    }

    #[tokio::test]
    async fn a_peer_holding_more_places_does_not_take_another_peers() {
        // Slow bodies from B hold two of three places; A's new connection is idle (its
        // handshake under way). B's next connection waits: it must not evict A's.
        let slots = Slots::new(3);
        let (b1, b2) = (slots.place(B).await, slots.place(B).await);
        let (r1, r2) = (b1.start(), b2.start());
        let mine = slots.place(A).await;
        let waiting = tokio::spawn({
            let slots = slots.clone();
            async move { slots.place(B).await }
        });
        assert!(
            !evicted_soon(&mine).await,
            "a connection of the peer holding the most places took another peer's place"
        );
        assert!(!waiting.is_finished());
        // B's own idle connection still gives way to B's new one.
        drop(r2);
        assert!(evicted_soon(&b2).await);
        drop(b2);
        let _b3 = tokio::time::timeout(Duration::from_secs(1), waiting)
            .await
            .expect("B's new connection placed once B's idle one gave way")
            .expect("the placing task");
        drop((r1, b1, mine));
    }

    #[tokio::test]
    async fn the_peer_holding_the_most_places_gives_way_first() {
        let slots = Slots::new(3);
        let mine = slots.place(A).await; // oldest, never asked
        let (b1, b2) = (slots.place(B).await, slots.place(B).await);
        let waiting = tokio::spawn({
            let slots = slots.clone();
            async move { slots.place(B).await }
        });
        assert!(evicted_soon(&b1).await, "the peer with two places kept them");
        assert!(!evicted_soon(&mine).await);
        drop(b1);
        let _b3 = tokio::time::timeout(Duration::from_secs(1), waiting)
            .await
            .unwrap()
            .unwrap();
        drop(b2);
    }
}
