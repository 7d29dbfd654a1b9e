// Package functions is this module's root package as the Cloud Functions (gen2) Go buildpack
// sees it. The buildpack reads the package name and imports of the .go files at the root of
// the uploaded source: because this package imports functions-framework-go/functions it
// generates its declarative main (which serves the target FUNCTION_TARGET names), and it
// imports either MODULE/functions (a folder named like this package) or the module root — both
// end in ./functions, whose init registers Dispatch, Sweep, SyncExecution, ObserveExecution and StartWorkflow.
// Nothing else belongs here; terraform/ deploys this module's root as the function source.
package functions

import (
	_ "github.com/GoogleCloudPlatform/functions-framework-go/functions" // selects the declarative template
	_ "github.com/stalesweep/stalesweep/functions"                      // registers the targets
)
