#!/bin/sh
# An example cleaner for server-binder's release gates (docs/operations.md, "Writing a
# cleaner"): it finds the servers waiting for GATE, cleans each, then passes the gate
# by writing the gate's condition into the server's status, naming the release it
# cleaned after.
#
#   KUBECONFIG=... sh manifests/examples/cleaner.sh example.com/disk-wiped
#   ONCE=1 sh manifests/examples/cleaner.sh example.com/disk-wiped   # one round, then exit
#   CLEAN_COMMAND=/usr/local/bin/wipe sh manifests/examples/cleaner.sh example.com/disk-wiped
#
# CLEAN_COMMAND is your cleaning: run with the server's name, it must exit 0 once the
# machine is clean (the default only says what it would do). Needs kubectl (1.27 or
# later, for --subresource) and jq. Its RBAC is the ClusterRole server-binder-cleaner
# (manifests/base/cleaner-clusterrole.yaml): read servers, write their status, nothing
# else.
set -eu

gate=${1:?usage: cleaner.sh GATE}
interval=${INTERVAL:-5}

# The servers being cleaned that wait for GATE, each with the release it is cleaned
# after: the value of metal.binder.dev/cleaning. They wait for GATE if the release
# recorded it (metal.binder.dev/cleaning-gates) or their spec names it, and no pass of
# GATE names this release yet.
waiting() {
    kubectl get servers -o json | jq -r --arg gate "$gate" '
      .items[]
      | (.metadata.annotations["metal.binder.dev/cleaning"] // empty) as $release
      | select(((.metadata.annotations["metal.binder.dev/cleaning-gates"] // "") | split(",") | index($gate))
               or any(.spec.releaseGates[]?; .name == $gate))
      | select([.status.conditions[]?
                | select(.type == $gate and .status == "True"
                         and ((.observedGeneration // 0) | tostring) == $release)]
               | length == 0)
      | "\(.metadata.name) \($release)"'
}

clean() {
    if [ -n "${CLEAN_COMMAND:-}" ]; then
        $CLEAN_COMMAND "$1"
    else
        echo "cleaner: cleaning $1 for $gate"
    fi
}

# Passes the gate on one server for the release read before cleaning: read the server
# again, and if it is still being cleaned after that release, write the condition with
# observedGeneration = that release and the resourceVersion just read (a conflict leaves
# it for the next round). If the release changed while we cleaned, the machine had
# another tenant since: our work does not count for it, so we write nothing.
pass() {
    kubectl get server "$1" -o json | jq -e --arg gate "$gate" --arg release "$2" '
      select(.metadata.annotations["metal.binder.dev/cleaning"] == $release)
      | .status.conditions = ([.status.conditions[]? | select(.type != $gate)] + [{
        type: $gate, status: "True", reason: "Passed",
        message: "passed by manifests/examples/cleaner.sh",
        observedGeneration: ($release | tonumber),
        lastTransitionTime: (now | todate)
      }])' >"$work/pass.json" \
      || { echo "cleaner: $1 is no longer being cleaned after release $2; not passing $gate"; return 0; }
    kubectl replace --subresource=status -f "$work/pass.json" >/dev/null \
      && echo "cleaner: passed $gate on $1 for release $2" \
      || echo "cleaner: could not pass $gate on $1 yet; trying again next round" >&2
}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

while :; do
    waiting | while read -r server release; do
        clean "$server" </dev/null
        pass "$server" "$release" </dev/null
    done
    [ -n "${ONCE:-}" ] && break
    sleep "$interval"
done
