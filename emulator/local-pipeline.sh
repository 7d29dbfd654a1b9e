#!/usr/bin/env bash
# Runs the whole pipeline locally: the Firestore and Pub/Sub emulators, the Cloud Run fake, and
# the functions (stalesweep serve), with the four topics and their push subscriptions created
# through gcloud against the Pub/Sub emulator, exactly as an operator would against production.
#
#   emulator/local-pipeline.sh            start everything, print how to use it, wait for Ctrl-C
#   emulator/local-pipeline.sh --check    start everything; seed a fresh row and publish its
#                                         execution's end entry (the event path), then a stale
#                                         row and a tick, with gcloud; wait for each to settle
#
# Ports (loopback only) are free ones picked at start, and printed; set FIRESTORE_PORT,
# PUBSUB_PORT, FUNCTIONS_PORT or CLOUDRUN_PORT to choose one. A port something already listens
# on is refused, so the script never talks to someone else's emulator. Everything started is
# stopped on exit, by process group.
set -euo pipefail

check=false
[ "${1:-}" = "--check" ] && check=true

root=$(cd "$(dirname "$0")/.." && pwd)
project=${PROJECT:-stalesweep-local}
work=$(mktemp -d)
pgids=()

log() { printf '[local-pipeline] %s\n' "$*" >&2; }

# in_use PORT: something accepts connections on 127.0.0.1:PORT.
in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# pick VAR OUT: sets OUT to the port VAR names (refused when something listens there), or to a
# free one no earlier pick took.
taken=" "
pick() {
  local name=$1 p=${!1:-}
  if [ -n "$p" ]; then
    if in_use "$p"; then log "$name=$p: something already listens on 127.0.0.1:$p; choose another port"; exit 2; fi
  else
    while :; do
      p=$((20000 + RANDOM % 40000))
      case "$taken" in *" $p "*) continue ;; esac
      in_use "$p" || break
    done
  fi
  taken="$taken$p "
  printf -v "$2" '%s' "$p"
}
pick FIRESTORE_PORT fs_port
pick PUBSUB_PORT ps_port
pick FUNCTIONS_PORT fn_port
pick CLOUDRUN_PORT cr_port

cleanup() {
  for g in "${pgids[@]}"; do kill -TERM -- "-$g" 2>/dev/null || true; done
  for g in "${pgids[@]}"; do
    for _ in $(seq 1 50); do kill -0 -- "-$g" 2>/dev/null || break; sleep 0.2; done
    kill -KILL -- "-$g" 2>/dev/null || true
  done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# start NAME CMD...: runs CMD as the leader of a new session (so gcloud keeps its JVM in the same
# process group) and remembers the group to stop it.
start() {
  local name=$1; shift
  setsid "$@" >"$work/$name.log" 2>&1 &
  pgids+=("$!")
}

wait_http() { # URL PGID: wait until it answers, served by the process group we started; 2 when it exited first
  for _ in $(seq 1 300); do
    kill -0 -- "-$2" 2>/dev/null || { log "the server for $1 exited; logs in $work"; tail -n 20 "$work"/*.log >&2; return 2; }
    curl -fs "$1" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  log "$1 did not answer; logs in $work"; tail -n 20 "$work"/*.log >&2; return 1
}

log "building stalesweep"
(cd "$root" && go build -o "$work/stalesweep" ./cmd/stalesweep)

name="projects/demo/locations/europe-west1/jobs/nightly/executions/nightly-00001"
ended="projects/demo/locations/europe-west1/jobs/nightly/executions/nightly-00002"
cat >"$work/executions.json" <<EOF
[{"name": "$name", "taskCount": 1, "succeededCount": 1, "completionTime": "2026-11-29T07:00:00Z",
  "conditions": [{"type": "Completed", "state": "CONDITION_SUCCEEDED", "lastTransitionTime": "2026-11-29T07:00:00Z"}]},
 {"name": "$ended", "taskCount": 1, "succeededCount": 1, "completionTime": "2026-11-29T07:00:00Z",
  "conditions": [{"type": "Completed", "state": "CONDITION_SUCCEEDED", "lastTransitionTime": "2026-11-29T07:00:00Z"}]}]
EOF

# emulator NAME VAR PORTVAR CMD...: starts an emulator on the port in PORTVAR (CMD's "{port}"
# stands for it) and waits for it to answer. A port picked at random can be taken by another
# process between the pick and the emulator's bind (other emulators start on this machine too),
# so when the emulator exits before answering on a port the script picked, it is started again
# on a fresh one, at most three times; a port the caller chose is used once.
emulator() {
  local name=$1 var=$2 portvar=$3; shift 3
  for attempt in 1 2 3; do
    local port=${!portvar} args=()
    for a in "$@"; do args+=("${a//\{port\}/$port}"); done
    log "starting the $name emulator on 127.0.0.1:$port"
    start "$name-$attempt" "${args[@]}"
    local pgid=${pgids[-1]}
    local rc=0
    wait_http "http://127.0.0.1:$port/" "$pgid" || rc=$?
    [ "$rc" = 0 ] && return 0
    [ "$rc" = 2 ] || return 1                     # it runs but does not answer: no retry
    [ -n "${!var:-}" ] && return 1                # the caller chose the port
    [ "$attempt" = 3 ] && return 1
    pick "$var" "$portvar"
  done
}
emulator firestore FIRESTORE_PORT fs_port gcloud emulators firestore start --host-port="127.0.0.1:{port}" --quiet
emulator pubsub PUBSUB_PORT ps_port gcloud beta emulators pubsub start --host-port="127.0.0.1:{port}" --project="$project" --quiet
start cloudrun "$work/stalesweep" fake-cloudrun --addr "127.0.0.1:$cr_port" --executions "$work/executions.json"

export FIRESTORE_EMULATOR_HOST="127.0.0.1:$fs_port"
export PUBSUB_EMULATOR_HOST="127.0.0.1:$ps_port"
export STALESWEEP_CLOUD_RUN_ENDPOINT="127.0.0.1:$cr_port"
export GOOGLE_CLOUD_PROJECT="$project"
export STALESWEEP_AUTH=off
start functions "$work/stalesweep" serve --addr "127.0.0.1:$fn_port"
for _ in $(seq 1 100); do curl -s -o /dev/null "http://127.0.0.1:$fn_port/StartWorkflow" && break; sleep 0.2; done

# gcloud against the emulator: it wants some account even there.
echo "emulator" >"$work/token"
export CLOUDSDK_AUTH_ACCESS_TOKEN_FILE="$work/token"
export CLOUDSDK_API_ENDPOINT_OVERRIDES_PUBSUB="http://127.0.0.1:$ps_port/"
export CLOUDSDK_CORE_PROJECT="$project"
export CLOUDSDK_CORE_DISABLE_PROMPTS=1
for pair in stalesweep-ticks:Dispatch stalesweep-sweeps:Sweep stalesweep-syncs:SyncExecution stalesweep-ends:ObserveExecution; do
  topic=${pair%%:*} target=${pair##*:}
  gcloud pubsub topics create "$topic" --quiet >/dev/null
  gcloud pubsub subscriptions create "$topic-push" --topic="$topic" --ack-deadline=600 \
    --push-endpoint="http://127.0.0.1:$fn_port/$target" --quiet >/dev/null
  log "topic $topic → push → http://127.0.0.1:$fn_port/$target"
done

tick='{"workflow_type": "runner.execution-sync-stale-cloud-run", "initial_data": {"min_age_seconds": 60}}'
if ! $check; then
  cat >&2 <<EOF

The pipeline is up. In another shell:

  export FIRESTORE_EMULATOR_HOST=127.0.0.1:$fs_port PUBSUB_EMULATOR_HOST=127.0.0.1:$ps_port
  export STALESWEEP_CLOUD_RUN_ENDPOINT=127.0.0.1:$cr_port GOOGLE_CLOUD_PROJECT=$project
  export CLOUDSDK_AUTH_ACCESS_TOKEN_FILE=$work/token CLOUDSDK_API_ENDPOINT_OVERRIDES_PUBSUB=http://127.0.0.1:$ps_port/ CLOUDSDK_CORE_PROJECT=$project

  # simulate a Cloud Scheduler tick:
  gcloud pubsub topics publish stalesweep-ticks --attribute=trigger=schedule --message='$tick'

  # simulate the log sink: publish a Cloud Run execution's end entry (a LogEntry, JSON) to
  # stalesweep-ends; the active row whose provider_ref.execution names it is settled at once.

  # or run one organization by hand (authentication is off locally):
  curl -s -X POST http://127.0.0.1:$fn_port/StartWorkflow -H 'Content-Type: application/json' \\
    -d '{"workflow_type": "runner.execution-sync-stale-cloud-run", "initial_data": {"organization_uuid": "..."}}'

Organizations need organizations/{uuid} with sweeps_enabled: true to be swept at all.
Function logs: $work/functions.log. Ctrl-C stops everything.
EOF
  wait
  exit 0
fi

# --check: one enabled organization with one stale row whose execution Cloud Run reports
# succeeded; a tick through gcloud must settle it.
org=0f8fad5b-d9cb-469f-a165-70867728950e
row=7c9e6679-7425-40de-944b-e07fc1f90ae7
docs="http://127.0.0.1:$fs_port/v1/projects/$project/databases/(default)/documents"
auth=(-H "Authorization: Bearer owner" -H "Content-Type: application/json")
curl -fs "${auth[@]}" -X POST "$docs/organizations?documentId=$org" \
  -d '{"fields": {"sweeps_enabled": {"booleanValue": true}}}' >/dev/null

# The event path: a row observed just now (no sweep would take it for a minute) whose execution
# has ended; its System Event entry, published as the sink would, settles it.
fresh=3f2504e0-4f89-41d3-9a0c-0305e82c3301
curl -fs "${auth[@]}" -X POST "$docs/runner_executions?documentId=$fresh" -d '{"fields": {
  "organization_uuid": {"stringValue": "'"$org"'"}, "provider": {"stringValue": "cloud_run"},
  "status": {"stringValue": "running"}, "active": {"booleanValue": true},
  "observed_at": {"timestampValue": "'"$(date -u +%Y-%m-%dT%H:%M:%SZ)"'"},
  "provider_ref": {"mapValue": {"fields": {"execution": {"stringValue": "'"$ended"'"}}}}}}' >/dev/null
entry='{"insertId": "local-check-1", "logName": "projects/demo/logs/cloudaudit.googleapis.com%2Fsystem_event",
  "protoPayload": {"serviceName": "run.googleapis.com", "methodName": "/Jobs.RunJob", "resourceName": "namespaces/demo/executions/nightly-00002"},
  "resource": {"type": "cloud_run_job", "labels": {"job_name": "nightly", "location": "europe-west1", "project_id": "demo"}},
  "labels": {"run.googleapis.com/execution_name": "nightly-00002"}, "timestamp": "'"$(date -u +%Y-%m-%dT%H:%M:%SZ)"'"}'
log "seeded fresh row $fresh; publishing its execution's end entry with gcloud"
gcloud pubsub topics publish stalesweep-ends --message="$entry" --quiet >/dev/null
settled_event=false
for _ in $(seq 1 150); do
  if curl -fs "${auth[@]}" "$docs/runner_executions/$fresh" | tr -d ' \n' | grep -q '"path":{"stringValue":"event"}'; then
    settled_event=true
    log "check passed: the entry went ends → ObserveExecution and settled the fresh row"
    break
  fi
  sleep 0.2
done
if ! $settled_event; then
  log "check failed: the fresh row was not settled from its entry; function logs:"
  tail -40 "$work/functions.log" >&2
  exit 1
fi

curl -fs "${auth[@]}" -X POST "$docs/runner_executions?documentId=$row" -d '{"fields": {
  "organization_uuid": {"stringValue": "'"$org"'"}, "provider": {"stringValue": "cloud_run"},
  "status": {"stringValue": "running"}, "active": {"booleanValue": true},
  "observed_at": {"timestampValue": "2026-01-01T00:00:00Z"},
  "provider_ref": {"mapValue": {"fields": {"execution": {"stringValue": "'"$name"'"}}}}}}' >/dev/null
log "seeded organization $org with stale row $row; publishing a tick with gcloud"
gcloud pubsub topics publish stalesweep-ticks --attribute=trigger=schedule --message="$tick" --quiet >/dev/null
for _ in $(seq 1 300); do
  if curl -fs "${auth[@]}" "$docs/runner_executions/$row" | tr -d ' \n' | grep -q '"outcome":{"stringValue":"succeeded"}'; then
    log "check passed: the tick went ticks → Dispatch → sweeps → Sweep → syncs → SyncExecution and settled the row"
    exit 0
  fi
  sleep 0.2
done
log "check failed: the row was not settled; function logs:"
tail -40 "$work/functions.log" >&2
exit 1
