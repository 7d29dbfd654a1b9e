// Package firestoreconn connects a process to Firestore: the client (the emulator when
// FIRESTORE_EMULATOR_HOST is set), the reachability check a process runs when it starts,
// Firestore's clock, and the facts of Firestore every store obeys (document ids, the earliest
// timestamp, the `in` filter's limit, which commits are ambiguous). The command bounds every call
// (cmd/stalesweep/firestore_bound.go). What the documents hold is the ledger's.
package firestoreconn

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"net"
	"os"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// EmulatorEnv is the variable the Firestore client follows to the emulator.
const EmulatorEnv = "FIRESTORE_EMULATOR_HOST"

// Options says which Firestore to open.
type Options struct {
	Project  string // required
	Database string // empty means "(default)"
	// DialOptions are added to the gRPC connection, e.g. interceptors that count calls. They are
	// honoured against the emulator too (the client ignores them there unless given a conn).
	DialOptions []grpc.DialOption
	// ClientOptions are passed to the client as they are, after the ones Open builds.
	ClientOptions []option.ClientOption
}

// Open returns a Firestore client: the emulator when FIRESTORE_EMULATOR_HOST is set, otherwise
// Firestore with Application Default Credentials.
func Open(ctx context.Context, o Options) (*firestore.Client, error) {
	if o.Project == "" {
		return nil, fmt.Errorf("open firestore: no project: set --project or GOOGLE_CLOUD_PROJECT")
	}
	db := o.Database
	if db == "" {
		db = firestore.DefaultDatabaseID
	}
	var opts []option.ClientOption
	if host := os.Getenv(EmulatorEnv); host != "" {
		// Dial the emulator ourselves so that DialOptions apply; the client would dial it
		// with its own options otherwise. It still dials its own too (firestore v1.29.2,
		// newClient), eagerly, before this connection replaces it: one idle connection per
		// client, which nothing uses or closes and gRPC drops after its idle timeout. Only
		// against the emulator; tests that count goroutines wait for its handshake.
		dial := append([]grpc.DialOption{
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithPerRPCCredentials(emulatorOwner{}),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(math.MaxInt32), grpc.MaxCallSendMsgSize(math.MaxInt32)),
		}, o.DialOptions...)
		conn, err := grpc.NewClient("passthrough:///"+host, dial...)
		if err != nil {
			return nil, fmt.Errorf("open firestore emulator at %s: %w", host, err)
		}
		opts = append(opts, option.WithGRPCConn(conn))
	} else {
		for _, d := range o.DialOptions {
			opts = append(opts, option.WithGRPCDialOption(d))
		}
	}
	opts = append(opts, o.ClientOptions...)
	c, err := firestore.NewClientWithDatabase(ctx, o.Project, db, opts...)
	if err != nil {
		return nil, fmt.Errorf("open firestore %s/%s: %w", o.Project, db, err)
	}
	return c, nil
}

// emulatorOwner authenticates to the emulator as its owner, which bypasses security rules, as
// the client library itself does against the emulator.
type emulatorOwner struct{}

func (emulatorOwner) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer owner"}, nil
}

func (emulatorOwner) RequireTransportSecurity() bool { return false }

// defaultEndpoint is where the client reaches Firestore when no emulator is set.
const defaultEndpoint = "firestore.googleapis.com:443"

// Endpoint is where Open's client reaches Firestore: the emulator's host:port, or the default
// endpoint.
func Endpoint() string {
	if host := os.Getenv(EmulatorEnv); host != "" {
		return host
	}
	return defaultEndpoint
}

// pingDoc is the document Ping reads: the clock's, which nothing writes (ServerClock).
var pingDoc = ClockCollection + "/now"

// Where names the Firestore o opens, for a person, after its endpoint: its project and database.
func (o Options) Where() string {
	return fmt.Sprintf("project %s, database %s", o.Project, cmp.Or(o.Database, firestore.DefaultDatabaseID))
}

// Ping reads one document, within timeout, to learn that Firestore answers: a process that
// cannot reach it says so when it starts, naming where it looked (Endpoint, o.Where), instead of
// failing its first run with a bare "context deadline exceeded". A refusal (credentials, roles,
// a project or database that does not exist) is told apart from silence.
func Ping(ctx context.Context, c *firestore.Client, o Options, timeout time.Duration) error {
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(dl).Round(time.Millisecond))
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	snap, err := c.Doc(pingDoc).Get(ctx)
	switch code := status.Code(err); {
	case code == codes.OK, code == codes.NotFound && snap != nil: // the probe document is absent
		return nil
	case ctx.Err() != nil, code == codes.Unavailable, code == codes.DeadlineExceeded, code == codes.Canceled:
		return fmt.Errorf("Firestore at %s unreachable (after %s; %s): %w%s", Endpoint(), timeout, o.Where(), err, dialDiagnosis(min(timeout, time.Second)))
	case code == codes.PermissionDenied, code == codes.Unauthenticated:
		return fmt.Errorf("Firestore at %s refused access (%s; check the credentials, and that the identity holds roles/datastore.user): %w", Endpoint(), o.Where(), err)
	case code == codes.NotFound:
		return fmt.Errorf("Firestore at %s has no such project or database (%s): %w", Endpoint(), o.Where(), err)
	default:
		return fmt.Errorf("Firestore at %s refused a read (%s): %w", Endpoint(), o.Where(), err)
	}
}

// dialDiagnosis tells, for a Firestore that did not answer, a refused or unroutable address
// from one that accepts connections and then says nothing (or drops them): the client's own
// error is often only the deadline.
func dialDiagnosis(timeout time.Duration) string {
	conn, err := net.DialTimeout("tcp", Endpoint(), timeout)
	if err != nil {
		return " (" + err.Error() + ")"
	}
	conn.Close()
	return " (it accepts connections but did not answer)"
}
