// Package previewcheck holds, in its test, the promise every workflow's dry run makes: its
// output says what its stats.preview says, and the real run that follows on the same data does
// what the dry run predicted. It reads the five workflows only; it has no code of its own.
package previewcheck
