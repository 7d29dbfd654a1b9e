package orgadmin_test

import (
	"testing"

	"github.com/stalesweep/stalesweep/internal/testkit/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }
