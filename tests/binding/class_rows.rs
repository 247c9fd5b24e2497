//! Classes in the summary of why a claim waits (docs/binding.md, "Why a claim waits"):
//! servers outside the claim's class, and servers a class sets aside from a claim naming
//! none, are counted under their own headings, and only the tenant's selector is quoted.

use std::collections::BTreeMap;
use std::sync::Arc;

use server_binder::api::*;
use server_binder::binding::world::classes::ClassCatalog;
use server_binder::binding::{PickState, Unavailability};

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn selector(pairs: &[(&str, &str)]) -> ServerSelector {
    ServerSelector {
        match_labels: labels(pairs),
        ..ServerSelector::default()
    }
}

fn claim(class: Option<&str>, selects: Option<(&str, &str)>) -> Arc<CachedClaim> {
    let spec = ServerClaimSpec {
        server_class_name: class.map(str::to_string),
        server_selector: selects.map(|pair| selector(&[pair])),
        ..ServerClaimSpec::default()
    };
    let mut c = CachedClaim::new("c", spec);
    c.meta_mut().namespace = Some("team-a".into());
    Arc::new(c)
}

#[test]
fn the_summary_says_outside_the_class_and_set_aside() {
    let gpu = ServerClass::new(
        "gpu",
        ServerClassSpec {
            server_selector: Some(selector(&[("kind", "gpu")])),
            ..ServerClassSpec::default()
        },
    );
    let mut catalog = ClassCatalog::default();
    catalog.replace_classes([Arc::new(gpu)]);
    let servers: Vec<CachedServer> = [("g1", "gpu"), ("c1", "cpu"), ("c2", "cpu")]
        .iter()
        .map(|(name, kind)| {
            let mut server = CachedServer::new(name, ServerSpec::default());
            *server.labels_mut() = labels(&[("kind", kind), ("rack", "r1")])
                .into_iter()
                .collect();
            catalog.resolve_server(&server).unwrap_or(server)
        })
        .collect();
    let pick = PickState {
        skip: &|_| false,
        refuses: &|_| false,
        waits_turn: false,
    };
    let of_gpu = claim(Some("gpu"), Some(("rack", "r2")));
    let (of_gpu, _) = catalog.resolve_ref(&of_gpu);
    assert_eq!(
        Unavailability::of(&of_gpu, &servers, pick).to_string(),
        "0/3 servers can serve this claim: 2 are not of its class (gpu), 1 does not match the selector (rack=r2)."
    );
    let classless = claim(None, None);
    let (classless, _) = catalog.resolve_ref(&classless);
    assert_eq!(
        Unavailability::of(&classless, &servers, pick).to_string(),
        "2/3 servers can serve this claim: 1 is set aside for a server class (the claim names none)."
    );
}
