// Chain entry ids as docs/data-model.md "### Chain entry ids" defines them, in dependency-free
// JavaScript: RFC 8785 canonical JSON of {chain, created_at, payload, prev, task}, SHA-256,
// lowercase hex. Used by docs/contract/verify-vectors.mjs and docs/examples/node-worker.

import { createHash } from 'node:crypto';

// canonicalJSON is RFC 8785 for the values a payload may hold (strings, booleans, integers,
// objects and arrays of those): object members sorted by their names' UTF-16 code units (what
// JavaScript's default sort compares), no whitespace, and JSON.stringify for every string and
// number, which already escapes exactly what RFC 8785 escapes and writes numbers as ECMAScript
// does.
export function canonicalJSON(v) {
  if (v === null || typeof v === 'boolean' || typeof v === 'string') return JSON.stringify(v);
  if (typeof v === 'number') {
    if (!Number.isFinite(v)) throw new TypeError(`canonicalJSON: ${v} has no JSON form`);
    return JSON.stringify(v);
  }
  if (Array.isArray(v)) return '[' + v.map(canonicalJSON).join(',') + ']';
  if (typeof v === 'object') {
    const keys = Object.keys(v).sort();
    return '{' + keys.map((k) => JSON.stringify(k) + ':' + canonicalJSON(v[k])).join(',') + '}';
  }
  throw new TypeError(`canonicalJSON: cannot encode a ${typeof v}`);
}

// entryTime formats a JavaScript Date (a millisecond clock) the way an entry's created_at is
// hashed: RFC 3339 in UTC with exactly six fraction digits, so ".907Z" becomes ".907000Z".
export function entryTime(date) {
  const iso = date.toISOString(); // 2026-12-01T18:27:45.907Z
  if (!/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/.test(iso)) throw new RangeError(`entryTime: year out of range: ${iso}`);
  return iso.slice(0, 23) + '000Z';
}

// entryTimeFromRFC3339 formats an RFC 3339 time of any precision (nanoseconds, an offset) the
// same way, truncating to the microsecond. Date keeps only milliseconds, so the fraction is
// taken from the string's own digits; only the whole seconds go through Date (to move an offset
// to UTC, which never changes the fraction).
export function entryTimeFromRFC3339(s) {
  const m = /^(\d{4}-\d\d-\d\d)[Tt](\d\d:\d\d:\d\d)(?:\.(\d+))?([Zz]|[+-]\d\d:\d\d)$/.exec(s);
  if (!m) throw new RangeError(`not an RFC 3339 time: ${JSON.stringify(s)}`);
  const [, day, clock, fraction = '', zone] = m;
  const whole = new Date(`${day}T${clock}${zone.toUpperCase()}`);
  if (Number.isNaN(whole.getTime())) throw new RangeError(`not an RFC 3339 time: ${JSON.stringify(s)}`);
  return whole.toISOString().slice(0, 19) + '.' + (fraction + '000000').slice(0, 6) + 'Z';
}

// entryId returns the canonical bytes (as a string) and the id of a chain entry. createdAt is
// already formatted (entryTime or entryTimeFromRFC3339).
export function entryId(task, chain, createdAt, prev, payload) {
  // Members in any order: canonicalJSON sorts them.
  const canonical = canonicalJSON({ task, chain, prev, created_at: createdAt, payload });
  const id = createHash('sha256').update(canonical, 'utf8').digest('hex');
  return { canonical, id };
}
