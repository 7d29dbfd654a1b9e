#!/usr/bin/env node
// Checks docs/contract/chain-vectors.json with JavaScript's own JSON.stringify: for each vector,
// build {chain, created_at, payload, prev, task} from task, chain, prev, written_at and payload
// as docs/data-model.md "### Chain entry ids" says, and compare the created_at, the canonical
// bytes and the id with the vector's. One line per vector; exit 1 on any mismatch.
//
//   node docs/contract/verify-vectors.mjs [path/to/chain-vectors.json]

import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { entryId, entryTimeFromRFC3339 } from './jcs.mjs';

const file = process.argv[2] ?? fileURLToPath(new URL('./chain-vectors.json', import.meta.url));
const { vectors } = JSON.parse(readFileSync(file, 'utf8'));
if (!Array.isArray(vectors) || vectors.length === 0) {
  console.log(`FAIL ${file}: no vectors`);
  process.exit(1);
}

let failed = 0;
for (const v of vectors) {
  const problems = [];
  let createdAt = '';
  try {
    createdAt = entryTimeFromRFC3339(v.written_at);
  } catch (err) {
    problems.push(err.message);
  }
  if (createdAt !== v.created_at) problems.push(`created_at ${JSON.stringify(createdAt)}, the vector says ${JSON.stringify(v.created_at)}`);
  const { canonical, id } = entryId(v.task, v.chain, createdAt, v.prev, v.payload);
  if (canonical !== v.canonical) problems.push(`canonical\n    ${canonical}\n  the vector says\n    ${v.canonical}`);
  if (id !== v.id) problems.push(`id ${id}, the vector says ${v.id}`);
  if (problems.length === 0) {
    console.log(`ok   ${v.name}: ${id}`);
  } else {
    failed++;
    console.log(`FAIL ${v.name}: ${problems.join('; ')}`);
  }
}
console.log(`${vectors.length - failed}/${vectors.length} vectors verify`);
process.exit(failed === 0 ? 0 : 1);
