#!/usr/bin/env node
// A task-queue worker in JavaScript, written from docs/writers.md ("Task queues") and
// docs/data-model.md ("task_queues/..." and "Chain entry ids") alone, against Firestore's REST
// API (v1) with Node's built-in fetch: no npm packages. It is an example, not part of the build;
// internal/ledger/nodeworker_test.go runs it against the Firestore emulator and checks every
// entry it writes with the product's own code.
//
//   FIRESTORE_EMULATOR_HOST=127.0.0.1:8080 node worker.mjs random --project P --queue Q --seed 1 --tasks 6
//   ... worker.mjs enqueue   --project P --queue Q --task T --slug S
//   ... worker.mjs claim     --project P --queue Q --worker W
//   ... worker.mjs heartbeat --project P --queue Q --task T --worker W --lease L
//
// Every operation is one transaction: read the task, check the precondition or the fence, create
// the chain entries (each with a must-not-exist precondition) and update the task, whose
// last_activity_at is the server's time (a REQUEST_TIME transform), never this process's.

import { pathToFileURL } from 'node:url';
import { entryId, entryTime } from '../../contract/jcs.mjs';

export class HeadMoved extends Error {
  constructor() { super('head moved'); }
}

// ---- Firestore REST, the few calls a worker needs -------------------------------------------

const str = (s) => ({ stringValue: s });
const int = (n) => ({ integerValue: String(n) }); // writers.md "int": integerValue, not a double
const time = (rfc3339) => ({ timestampValue: rfc3339 });
function value(v) { // a payload's values: strings, booleans, integers, maps
  if (typeof v === 'string') return str(v);
  if (typeof v === 'boolean') return { booleanValue: v };
  if (Number.isInteger(v)) return int(v);
  if (v && typeof v === 'object') return { mapValue: { fields: mapFields(v) } };
  throw new TypeError(`no Firestore value for ${typeof v}`);
}
const mapFields = (o) => Object.fromEntries(Object.entries(o).map(([k, v]) => [k, value(v)]));

export class Firestore {
  constructor(project, host = process.env.FIRESTORE_EMULATOR_HOST) {
    if (!host) throw new Error('FIRESTORE_EMULATOR_HOST is not set');
    this.base = `http://${host}/v1/`;
    this.documents = `projects/${project}/databases/(default)/documents`;
  }

  // name is a document's resource name; ids go into request bodies as they are (no escaping).
  name(...ids) { return [this.documents, ...ids].join('/'); }

  async call(path, body) {
    const res = await fetch(this.base + path, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Authorization: 'Bearer owner' },
      body: JSON.stringify(body),
    });
    const text = await res.text();
    if (!res.ok) {
      const err = new Error(`${path}: HTTP ${res.status}: ${text}`);
      try { err.code = JSON.parse(text).error.status; } catch { /* not JSON */ }
      throw err;
    }
    return JSON.parse(text);
  }

  // get reads documents in the transaction (which locks them until it ends): fields, or null.
  async get(tx, ...names) {
    const got = await this.call(`${this.documents}:batchGet`, { documents: names, transaction: tx });
    const byName = new Map(got.filter((r) => r.found).map((r) => [r.found.name, r.found.fields ?? {}]));
    return names.map((n) => byName.get(n) ?? null);
  }

  // transact runs body(tx) → {writes, result} and commits its writes, or rolls back when there
  // are none. Firestore aborts a transaction on contention: then the whole body runs again.
  async transact(body) {
    for (let attempt = 1; ; attempt++) {
      const { transaction: tx } = await this.call(`${this.documents}:beginTransaction`, { options: { readWrite: {} } });
      try {
        const { writes = [], result } = await body(tx);
        if (writes.length === 0) {
          await this.call(`${this.documents}:rollback`, { transaction: tx });
        } else {
          await this.call(`${this.documents}:commit`, { writes, transaction: tx });
        }
        return result;
      } catch (err) {
        await this.call(`${this.documents}:rollback`, { transaction: tx }).catch(() => {});
        if (err.code !== 'ABORTED' || attempt >= 5) throw err;
      }
    }
  }

  // newTasks lists the queue's "new" tasks, oldest created_at first (writers.md "claim").
  async newTasks(queue, limit) {
    const parent = [this.documents, 'task_queues', encodeURIComponent(queue)].join('/');
    const rows = await this.call(`${parent}:runQuery`, {
      structuredQuery: {
        from: [{ collectionId: 'tasks' }],
        where: { fieldFilter: { field: { fieldPath: 'status' }, op: 'EQUAL', value: str('new') } },
        orderBy: [{ field: { fieldPath: 'created_at' }, direction: 'ASCENDING' }],
        limit,
      },
    });
    return rows.filter((r) => r.document).map((r) => r.document.name.split('/').pop());
  }
}

// ---- the worker ------------------------------------------------------------------------------
// (Payloads are written here in no particular member order: the canonical form sorts them.)

export class Worker {
  constructor(fs, queue, { clock = () => new Date() } = {}) {
    this.fs = fs;
    this.queue = queue;
    this.clock = clock; // the worker's own millisecond clock: entries' and tasks' created_at
    this.entries = 0; // entries this worker has committed
  }

  taskName(task) { return this.fs.name('task_queues', this.queue, 'tasks', task); }

  // entry builds one chain entry (writers.md "Task queues", data-model.md "Chain entry ids"):
  // the id hashes the same created_at string the document stores, and the write is a create.
  entry(task, chain, prev, payload) {
    const createdAt = entryTime(this.clock());
    const { id } = entryId(task, chain, createdAt, prev, payload);
    const write = {
      update: { name: `${this.taskName(task)}/${chain}/${id}`, fields: { created_at: time(createdAt), prev: str(prev), payload: value(payload) } },
      currentDocument: { exists: false },
    };
    return { id, write };
  }

  // taskUpdate sets fields of an existing task and stamps last_activity_at with the server's time.
  taskUpdate(task, fields) {
    return {
      update: { name: this.taskName(task), fields },
      updateMask: { fieldPaths: Object.keys(fields) },
      updateTransforms: [{ fieldPath: 'last_activity_at', setToServerValue: 'REQUEST_TIME' }],
      currentDocument: { exists: true },
    };
  }

  // writers.md "### enqueue": the task must not exist.
  async enqueue(task, slug) {
    const queueName = this.fs.name('task_queues', this.queue);
    await this.fs.transact(async (tx) => {
      const [queueDoc, existing] = await this.fs.get(tx, queueName, this.taskName(task));
      if (existing) throw new Error(`task ${JSON.stringify(task)} exists`);
      const status = this.entry(task, 'statuses', '', { status: 'new' });
      const created = time(this.clock().toISOString());
      const writes = [];
      if (!queueDoc) writes.push({ update: { name: queueName, fields: { created_at: created } }, currentDocument: { exists: false } });
      writes.push(status.write, {
        update: {
          name: this.taskName(task),
          fields: {
            slug: str(slug), status: str('new'), created_at: created, status_tip: str(status.id),
            report_tip: str(''), heartbeat_tip: str(''), reclaim_count: int(0),
          },
        },
        updateTransforms: [{ fieldPath: 'last_activity_at', setToServerValue: 'REQUEST_TIME' }],
        currentDocument: { exists: false },
      });
      return { writes };
    });
    this.entries += 1;
  }

  // writers.md "### claim": the oldest "new" task whose status is still "new" when read in the
  // transaction; a candidate another worker took in between is passed over. Returns the lease
  // {task, worker, lease} or null when the queue has no new task.
  async claim(worker) {
    for (;;) {
      const candidates = await this.fs.newTasks(this.queue, 10);
      if (candidates.length === 0) return null;
      for (const task of candidates) {
        const lease = await this.fs.transact(async (tx) => {
          const [t] = await this.fs.get(tx, this.taskName(task));
          if (t?.status?.stringValue !== 'new') return {}; // taken since the query
          const status = this.entry(task, 'statuses', t.status_tip.stringValue, { worker_id: worker, status: 'working' });
          const heartbeat = this.entry(task, 'heartbeats', t.heartbeat_tip.stringValue, { worker_id: worker, claim: true });
          const writes = [status.write, heartbeat.write, this.taskUpdate(task, {
            status: str('working'), worker_id: str(worker), status_tip: str(status.id), heartbeat_tip: str(heartbeat.id),
          })];
          return { writes, result: { task, worker, lease: heartbeat.id } };
        });
        if (lease) {
          this.entries += 2;
          return lease;
        }
      }
    }
  }

  // fenced runs one append fenced on the lease (writers.md, "The fence"): the task must be
  // "working" with heartbeat_tip == lease, or the worker no longer holds it and writes nothing.
  async fenced({ task, lease }, append) {
    const result = await this.fs.transact(async (tx) => {
      const [t] = await this.fs.get(tx, this.taskName(task));
      if (t?.status?.stringValue !== 'working' || t.heartbeat_tip?.stringValue !== lease) throw new HeadMoved();
      const { entry, fields, result } = append(t);
      return { writes: [entry.write, this.taskUpdate(task, fields)], result };
    });
    this.entries += 1;
    return result;
  }

  // writers.md "### heartbeat": returns the new lease.
  heartbeat(l) {
    return this.fenced(l, () => {
      const entry = this.entry(l.task, 'heartbeats', l.lease, { worker_id: l.worker });
      return { entry, fields: { heartbeat_tip: str(entry.id) }, result: { ...l, lease: entry.id } };
    });
  }

  // writers.md "### report": the lease does not change.
  report(l, body) {
    return this.fenced(l, (t) => {
      const entry = this.entry(l.task, 'reports', t.report_tip.stringValue, { worker_id: l.worker, body });
      return { entry, fields: { report_tip: str(entry.id) }, result: entry.id };
    });
  }

  // writers.md "### complete, fail".
  complete(l) {
    return this.fenced(l, (t) => {
      const entry = this.entry(l.task, 'statuses', t.status_tip.stringValue, { worker_id: l.worker, status: 'done' });
      return { entry, fields: { status: str('done'), status_tip: str(entry.id) } };
    });
  }

  fail(l, reason) {
    return this.fenced(l, (t) => {
      const entry = this.entry(l.task, 'statuses', t.status_tip.stringValue, { worker_id: l.worker, status: 'failed', reason });
      return { entry, fields: { status: str('failed'), status_tip: str(entry.id), failure_reason: str(reason) } };
    });
  }
}

// ---- the command line ------------------------------------------------------------------------

// mulberry32: a small seeded generator, so a seed names one run.
function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const AWKWARD = ['<&>', 'é日本😀', '\u2028', 'naïve – ', 'ﬁ€'];
const BODIES = ['say "hi" \\ back\\slash', 'tab\there\nnewline\r\n', 'ctl \u0001\u001f del \u007f', 'line\u2028sep\u2029para <&>', 'emoji 😀 日本語 é', '{"json": [1, 2]}'];

async function random(fs, queue, seed, count) {
  if (count < 3) throw new Error('--tasks must be at least 3: two are left working');
  const r = rng(seed);
  const pick = (xs) => xs[Math.floor(r() * xs.length)];
  const w = new Worker(fs, queue);
  const tasks = [];
  for (let i = 0; i < count; i++) {
    const task = `t${seed}-${i}${AWKWARD[i % AWKWARD.length]}${pick(AWKWARD)}`; // ids may hold any of them
    await w.enqueue(task, `slug ${pick(AWKWARD)} ${i}`);
    tasks.push(task);
  }
  const workers = r() < 0.5 ? ['node<&>-1'] : ['node<&>-1', 'node-é😀-2'];
  const leases = [];
  for (let i = 0; i < count; i++) {
    let l = await w.claim(pick(workers));
    for (let n = Math.floor(r() * 3); n > 0; n--) {
      const old = l;
      l = await w.heartbeat(l);
      // The fence, checked on ourselves: the lease before a heartbeat no longer holds the task.
      if (await w.report(old, 'stale').then(() => true, (e) => { if (e instanceof HeadMoved) return false; throw e; })) {
        throw new Error('a report on a stale lease was not refused');
      }
    }
    for (let n = Math.floor(r() * 3); n > 0; n--) await w.report(l, pick(BODIES) + pick(BODIES));
    leases.push(l);
  }
  // Finish all but two; those two stay "working", as a worker that died would leave them.
  for (const l of leases.slice(0, -2)) {
    if (r() < 0.5) await w.complete(l);
    else await w.fail(l, `exit 1: <stderr> "${pick(BODIES)}" \u2028 ${pick(AWKWARD)}`);
  }
  const leftWorking = leases.slice(-2).map((l) => ({ task: l.task, worker: l.worker, lease: l.lease }));
  return { tasks, left_working: leftWorking, entries: w.entries };
}

function flags(argv) {
  const out = {};
  for (let i = 0; i < argv.length; i += 2) {
    if (!argv[i].startsWith('--') || i + 1 >= argv.length) throw new Error(`bad argument ${argv[i]}`);
    out[argv[i].slice(2)] = argv[i + 1];
  }
  for (const k of ['project', 'queue']) if (!out[k]) throw new Error(`--${k} is required`);
  return out;
}

async function main([cmd, ...argv]) {
  const f = flags(argv);
  const fs = new Firestore(f.project);
  const w = new Worker(fs, f.queue);
  switch (cmd) {
    case 'random':
      return random(fs, f.queue, Number(f.seed ?? 1), Number(f.tasks ?? 6));
    case 'enqueue':
      await w.enqueue(f.task, f.slug ?? '');
      return { ok: true };
    case 'claim': {
      const l = await w.claim(f.worker);
      return l ? { task: l.task, lease: l.lease } : { task: null };
    }
    case 'heartbeat':
      try {
        const l = await w.heartbeat({ task: f.task, worker: f.worker, lease: f.lease });
        return { ok: true, lease: l.lease };
      } catch (err) {
        if (err instanceof HeadMoved) return { ok: false, error: err.message };
        throw err;
      }
    default:
      throw new Error(`unknown command ${JSON.stringify(cmd)}: random, enqueue, claim or heartbeat`);
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) { // run, not imported
  main(process.argv.slice(2)).then(
    (out) => console.log(JSON.stringify(out)),
    (err) => { console.error(err.stack ?? String(err)); process.exit(1); },
  );
}
