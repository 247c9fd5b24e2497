//! The statistics the report computes: percentiles, max-min fair shares and Jain's
//! fairness index. Pure.

/// The nearest-rank percentile `p` (0..=1) of sorted `values`; 0 if there are none.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    let rank = (sorted.len() as f64 * p).ceil() as usize;
    sorted
        .get(rank.saturating_sub(1).min(sorted.len().saturating_sub(1)))
        .copied()
        .unwrap_or(0.0)
}

/// The max-min fair split of `capacity` over `demands` (water-filling): each gets
/// `min(demand, level)`, the level being the highest at which the shares fit in the
/// capacity. No one gets more than it asked for, and no one could get more without
/// taking from one that has less. If the capacity exceeds the demands, each gets its
/// demand.
pub fn max_min_shares(demands: &[usize], capacity: usize) -> Vec<f64> {
    let mut order: Vec<usize> = (0..demands.len()).collect();
    order.sort_by_key(|&i| demands[i]);
    let mut shares = vec![0.0; demands.len()];
    let mut left = capacity as f64;
    for (served, &i) in order.iter().enumerate() {
        // What each of the ones not yet served would get if the rest were split evenly.
        let level = left / (order.len() - served) as f64;
        shares[i] = (demands[i] as f64).min(level);
        left -= shares[i];
    }
    shares
}

/// Jain's fairness index `(Σx)² / (n·Σx²)`: 1 when every `x` is equal, `1/n` when one
/// has all of it; `None` for no values or all zero.
pub fn jain(xs: &[f64]) -> Option<f64> {
    let sum: f64 = xs.iter().sum();
    let squares: f64 = xs.iter().map(|x| x * x).sum();
    (squares > 0.0).then(|| sum * sum / (xs.len() as f64 * squares))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 0.50), 50.0);
        assert_eq!(percentile(&v, 0.90), 90.0);
        assert_eq!(percentile(&v, 0.99), 99.0);
        assert_eq!(percentile(&v, 1.0), 100.0);
        assert_eq!(percentile(&v, 0.0), 1.0);
        assert_eq!(percentile(&[7.0], 0.99), 7.0);
        assert_eq!(percentile(&[], 0.5), 0.0);
        assert_eq!(percentile(&[1.0, 2.0, 3.0], 0.5), 2.0);
    }

    #[test]
    fn max_min_gives_small_demands_in_full_and_splits_the_rest_evenly() {
        // 100 to share: the two small ones get what they asked, the big two split 88.
        assert_eq!(
            max_min_shares(&[500, 5, 7, 300], 100),
            [44.0, 5.0, 7.0, 44.0]
        );
        // Equal demands: an equal split, fractional if need be.
        assert_eq!(max_min_shares(&[10, 10, 10, 10], 10), [2.5; 4]);
        // More capacity than demand: each gets its demand.
        assert_eq!(max_min_shares(&[3, 1], 10), [3.0, 1.0]);
        assert_eq!(max_min_shares(&[0, 4], 4), [0.0, 4.0]);
        assert!(max_min_shares(&[], 4).is_empty());
    }

    #[test]
    fn jain_is_one_when_equal_and_one_over_n_when_one_has_all() {
        assert_eq!(jain(&[1.0, 1.0, 1.0, 1.0]), Some(1.0));
        assert_eq!(jain(&[0.5, 0.5]), Some(1.0));
        assert_eq!(jain(&[4.0, 0.0, 0.0, 0.0]), Some(0.25));
        // (1 + 3)² / (2 · (1 + 9)) = 0.8
        let j = jain(&[1.0, 3.0]).unwrap();
        assert!((j - 0.8).abs() < 1e-12, "{j}");
        assert_eq!(jain(&[0.0, 0.0]), None);
        assert_eq!(jain(&[]), None);
    }
}
