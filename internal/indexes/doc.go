// Package indexes declares what Firestore must be configured with for stalesweep's queries and
// bookkeeping: the composite indexes its queries need (Composite) and the collections whose
// documents expire (Expiring, the TTL policies). `stalesweep indexes` renders both into
// firestore.indexes.json and the Terraform module, the deploy checks hold the plan to them, and
// the tests hold every query the code runs to an entry of Composite. The deployed function
// never reads them: the configuration is applied at deploy time.
package indexes
