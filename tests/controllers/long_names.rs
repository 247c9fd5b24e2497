//! Objects whose names are as long as a name may be (253 characters) still get their
//! events: kube's Recorder would name the event `<name>.<hex nanoseconds>`, which the API
//! server refuses, so the controllers shorten it.

use k8s_openapi::api::core::v1::Event;
use kube::ResourceExt;
use kube::api::{Api, ListParams};

use crate::controllers::stage::wait_bound;
use crate::controllers::support::*;

/// A 253-character DNS subdomain whose 236th character (where an event name's base is
/// cut to leave room for `.<16 hex digits>`) is a `-`: the cut must not leave `-.`.
fn longest_name(prefix: &str) -> String {
    let name = format!(
        "{prefix}.{}-{}",
        "x".repeat(234 - prefix.len()),
        "y".repeat(17)
    );
    assert_eq!((name.len(), &name[235..236]), (253, "-"));
    name
}

/// An event of this reason about the object, checking that every such event regards it
/// by uid and namespace too.
async fn event_about(env: &Env, kind: &str, obj: &impl ResourceExt, reason: &str) -> Event {
    let events = Api::<Event>::all(env.client.clone())
        .list(&ListParams::default())
        .await
        .expect("list events")
        .items;
    let found: Vec<Event> = events
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(reason))
        .filter(|e| e.involved_object.kind.as_deref() == Some(kind))
        .filter(|e| e.involved_object.name == Some(obj.name_any()))
        .collect();
    for event in &found {
        let regarding = &event.involved_object;
        assert_eq!(regarding.uid, obj.uid(), "{event:#?}");
        let namespace = regarding.namespace.clone().filter(|n| !n.is_empty());
        assert_eq!(namespace, obj.namespace(), "{event:#?}");
    }
    found.into_iter().next().expect("the event")
}

#[tokio::test]
async fn a_claim_and_a_server_with_253_character_names_bind_and_get_their_events() {
    let mut env = Env::new().await;
    let claim = longest_name("claim");
    let server = longest_name("server");
    env.create_server(&server, &[]).await;
    env.create_claim(&claim).await;
    env.start(2).await;
    let (c, s) = wait_bound(&env, &claim, &server).await;

    let note = env
        .wait_event("ServerClaim", &claim, "Normal", "Bound")
        .await;
    assert!(note.contains(&server), "{note}");
    env.wait_event("Server", &server, "Normal", "Claimed").await;

    let bound = event_about(&env, "ServerClaim", &c, "Bound").await;
    let claimed = event_about(&env, "Server", &s, "Claimed").await;
    // The claim's events live in its namespace; a cluster-scoped server's in `default`.
    for (event, namespace, object) in [(&bound, NS, &claim), (&claimed, "default", &server)] {
        let name = event.metadata.name.clone().unwrap();
        assert_eq!(event.metadata.namespace.as_deref(), Some(namespace));
        assert!(name.len() <= 253, "{name}");
        assert!(name.starts_with(&object[..235]), "{name}");
        assert!(!name.contains("-."), "{name}");
        assert_eq!(event.reporting_component.as_deref(), Some("server-binder"));
        assert!(event.reporting_instance.is_some() && event.event_time.is_some());
        assert_eq!(event.action.as_deref(), Some("Binding"));
    }
}
