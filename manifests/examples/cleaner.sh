#!/bin/sh
# An example cleaner for server-binder's release gates (docs/binding.md, "Release
# gates"): it finds the servers waiting for GATE after their last release, cleans each
# (replace `clean` with your wipe, power-off or provisioning call), then passes the gate
# by writing the gate's condition into the server's status.
#
#   KUBECONFIG=... sh manifests/examples/cleaner.sh example.com/disk-wiped
#   ONCE=1 sh manifests/examples/cleaner.sh example.com/disk-wiped   # one pass, then exit
#
# Needs kubectl (1.27 or later, for --subresource) and jq. Its RBAC is the ClusterRole
# server-binder-cleaner (manifests/base/cleaner-clusterrole.yaml): read servers, write
# their status, nothing else.
set -eu

gate=${1:?usage: cleaner.sh GATE}
interval=${INTERVAL:-5}

# The servers being cleaned whose GATE has no pass for this release: a condition of the
# gate's type, "True", with observedGeneration at least the release's generation (the
# value of the metal.binder.dev/cleaning annotation).
waiting() {
    kubectl get servers -o json | jq -r --arg gate "$gate" '
      .items[]
      | (.metadata.annotations["metal.binder.dev/cleaning"] // empty) as $release
      | select(any(.spec.releaseGates[]?; .name == $gate) or (.spec.releaseGates == null))
      | select([.status.conditions[]?
                | select(.type == $gate and .status == "True"
                         and (.observedGeneration // 0) >= ($release | tonumber))]
               | length == 0)
      | .metadata.name'
}

# Your cleaning goes here: wipe the disks, power the machine off, ...
clean() {
    echo "cleaner: cleaning $1 for $gate"
}

# Passes the gate on one server: the condition, with the generation read, written back
# with the resourceVersion read (a conflict leaves it for the next round).
pass() {
    kubectl get server "$1" -o json | jq --arg gate "$gate" '
      .status.conditions = ([.status.conditions[]? | select(.type != $gate)] + [{
        type: $gate, status: "True", reason: "Passed",
        message: "passed by manifests/examples/cleaner.sh",
        observedGeneration: .metadata.generation,
        lastTransitionTime: (now | todate)
      }])' | kubectl replace --subresource=status -f - >/dev/null \
      && echo "cleaner: passed $gate on $1" \
      || echo "cleaner: could not pass $gate on $1 yet; trying again next round" >&2
}

while :; do
    for server in $(waiting); do
        clean "$server"
        pass "$server"
    done
    [ -n "${ONCE:-}" ] && break
    sleep "$interval"
done
