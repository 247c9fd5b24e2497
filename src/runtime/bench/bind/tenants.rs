//! `--tenants`: which namespace each claim belongs to and when it is created. Pure:
//! claim `j`'s namespace and creation time follow from indexes, so that two runs of a
//! command create the same claims in the same namespaces at the same times.
//!
//! `flood` is the fairness case: claims `0..F` (four in five) belong to the flood,
//! namespace 0, and are all created at once; the rest go round-robin over the other
//! namespaces and trickle in at `--rate` per second in all. With fewer servers than the
//! flood has claims, the flood always has a claim waiting, so every small tenant's claim
//! competes with it for the next server to free: the fair order decides who gets it.

use std::time::Duration;

use serde::Serialize;

/// How the claims are spread over the namespaces, and when they are created.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Tenants {
    /// Round-robin over the namespaces, one after another (at `--rate`).
    #[default]
    Even,
    /// Namespace 0 (the flood) creates four in five claims at once; the other
    /// namespaces share the rest round-robin and trickle them in at `--rate` in all.
    Flood,
}

impl Tenants {
    pub fn name(self) -> &'static str {
        match self {
            Tenants::Even => "even",
            Tenants::Flood => "flood",
        }
    }
}

/// The flood's share of the claims, as a fraction: four in five.
const FLOOD_SHARE: (usize, usize) = (4, 5);

/// The claims of one run, by index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Schedule {
    pub tenants: Tenants,
    pub claims: usize,
    pub namespaces: usize,
}

impl Schedule {
    pub fn new(tenants: Tenants, claims: usize, namespaces: usize) -> Self {
        Self {
            tenants,
            claims,
            namespaces: namespaces.max(1),
        }
    }

    /// The flood's claims are `0..flood_claims()`; none without one.
    pub fn flood_claims(&self) -> usize {
        match self.tenants {
            Tenants::Even => 0,
            // A single namespace has no one to trickle: it is all flood.
            Tenants::Flood if self.namespaces == 1 => self.claims,
            Tenants::Flood => self.claims * FLOOD_SHARE.0 / FLOOD_SHARE.1,
        }
    }

    /// Whether namespace `k` is the flood.
    pub fn is_flood(&self, k: usize) -> bool {
        self.tenants == Tenants::Flood && k == 0
    }

    /// The namespace (its index) of claim `j`.
    pub fn namespace(&self, j: usize) -> usize {
        let flood = self.flood_claims();
        match self.tenants {
            Tenants::Even => j % self.namespaces,
            Tenants::Flood if j < flood => 0,
            Tenants::Flood => 1 + (j - flood) % (self.namespaces - 1),
        }
    }

    /// When claim `j` is created with `--rate` (after the first claim's time): `None`
    /// for at once, as fast as the API server takes them; else its time at `rate` claims
    /// per second, counted over the paced claims only.
    pub fn offset(&self, j: usize, rate: f64) -> Option<Duration> {
        let paced = j.checked_sub(self.flood_claims())?;
        Some(Duration::from_secs_f64(paced as f64 / rate))
    }

    /// The claims of namespace `k`.
    pub fn demand(&self, k: usize) -> usize {
        let flood = self.flood_claims();
        match self.tenants {
            Tenants::Even => spread(self.claims, self.namespaces, k),
            Tenants::Flood if k == 0 => flood,
            Tenants::Flood => spread(self.claims - flood, self.namespaces - 1, k - 1),
        }
    }
}

/// Of `n` items dealt round-robin over `over` places, how many place `k` gets.
fn spread(n: usize, over: usize, k: usize) -> usize {
    n / over + usize::from(k < n % over)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn even_is_round_robin_in_index_order() {
        let s = Schedule::new(Tenants::Even, 10, 3);
        let ns: Vec<usize> = (0..10).map(|j| s.namespace(j)).collect();
        assert_eq!(ns, [0, 1, 2, 0, 1, 2, 0, 1, 2, 0]);
        assert_eq!(s.offset(4, 2.0), Some(Duration::from_secs(2)));
        assert_eq!((0..3).map(|k| s.demand(k)).collect::<Vec<_>>(), [4, 3, 3]);
        assert!(!s.is_flood(0));
    }

    #[test]
    fn the_flood_takes_four_in_five_at_once_and_the_rest_trickle() {
        let s = Schedule::new(Tenants::Flood, 100, 5);
        assert_eq!(s.flood_claims(), 80);
        assert!((0..80).all(|j| s.namespace(j) == 0 && s.offset(j, 10.0).is_none()));
        // The trickle: round-robin over namespaces 1..=4, 10 a second from the start.
        let ns: Vec<usize> = (80..86).map(|j| s.namespace(j)).collect();
        assert_eq!(ns, [1, 2, 3, 4, 1, 2]);
        assert_eq!(s.offset(80, 10.0), Some(Duration::ZERO));
        assert_eq!(s.offset(95, 10.0), Some(Duration::from_millis(1500)));
        assert_eq!(
            (0..5).map(|k| s.demand(k)).collect::<Vec<_>>(),
            [80, 5, 5, 5, 5]
        );
        assert!(s.is_flood(0) && !s.is_flood(1));
    }

    #[test]
    fn demand_counts_each_namespace_s_claims() {
        for (tenants, claims, namespaces) in [
            (Tenants::Flood, 37, 4),
            (Tenants::Flood, 3, 7),
            (Tenants::Flood, 9, 1),
            (Tenants::Even, 11, 4),
            (Tenants::Even, 2, 5),
        ] {
            let s = Schedule::new(tenants, claims, namespaces);
            for k in 0..namespaces {
                let counted = (0..claims).filter(|&j| s.namespace(j) == k).count();
                assert_eq!(s.demand(k), counted, "{s:?} namespace {k}");
            }
        }
    }
}
