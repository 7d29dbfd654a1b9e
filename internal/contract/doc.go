// Package contract holds what stalesweep promises to its callers: the workflow types, the JSON
// Schema of each workflow's input (encoding its seed document: types, defaults, bounds, required
// fields, no unknown fields), and the error codes of the HTTP and command faces.
//
// Invariants:
//   - Every input is validated against its schema before anything is read or written, and a
//     rejection is a *ValidationError that names the field and the rule it broke.
//   - Defaults live in the schemas and Validate applies them, so a workflow never sees a missing
//     optional field; a test holds each `...Default` constant to its schema.
//   - Numbers are validated exactly (big rationals), so 2^53 is told apart from 2^53 − 1.
package contract
