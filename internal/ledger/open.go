// Package ledger is stalesweep's Firestore layer: the documents runners write and stalesweep
// settles, the composite indexes the queries need, and the transactions that settle one row at a
// time.
//
// What holds:
//   - Every query is scoped (an organization, a provider), bounded by a limit, ordered on the
//     indexed inequality field, and paged with a cursor, never an offset; Indexes lists the
//     composite index each one needs, and a test holds every query to that list (the emulator
//     checks no indexes, production does).
//   - Every settlement is one transaction that re-reads its row, decides again on what it read,
//     and writes only if the row is still in the state the decision was made on. Reads come
//     before writes, attempts are bounded, and each transaction has its own timeout. The body
//     may run more than once, so it builds its writes afresh on every attempt.
package ledger

import (
	"context"
	"fmt"
	"math"
	"os"
	"strings"
	"time"
	"unicode/utf8"

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

// CheckDocID reports why id cannot name a Firestore document, or nil: it must be valid UTF-8 of
// at most 1,500 bytes, hold no "/", not be "." or "..", and not match __.*__.
func CheckDocID(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("is empty")
	case len(id) > 1500:
		return fmt.Errorf("is longer than 1500 bytes")
	case !utf8.ValidString(id):
		return fmt.Errorf("is not valid UTF-8")
	case strings.Contains(id, "/"):
		return fmt.Errorf("holds a /")
	case id == "." || id == "..":
		return fmt.Errorf("is %q", id)
	case len(id) >= 4 && strings.HasPrefix(id, "__") && strings.HasSuffix(id, "__"):
		return fmt.Errorf("matches __.*__, which Firestore reserves")
	}
	return nil
}

// DefaultEndpoint is where the client reaches Firestore when no emulator is set.
const DefaultEndpoint = "firestore.googleapis.com:443"

// Endpoint is where Open's client reaches Firestore: the emulator's host:port, or the default
// endpoint.
func Endpoint() string {
	if host := os.Getenv(EmulatorEnv); host != "" {
		return host
	}
	return DefaultEndpoint
}

// pingDoc is the document Ping reads; nothing writes it, so the read finds nothing.
var pingDoc = RunsCollection + "/stalesweep-connectivity-probe"

// Ping reads one document, within timeout, to learn that Firestore answers: a process that
// cannot reach it says so when it starts, naming where it looked, instead of failing its first
// run with a bare "context deadline exceeded".
func Ping(ctx context.Context, c *firestore.Client, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	_, err := c.Doc(pingDoc).Get(ctx)
	switch code := status.Code(err); {
	case code == codes.OK, code == codes.NotFound:
		return nil
	case ctx.Err() != nil, code == codes.Unavailable, code == codes.DeadlineExceeded:
		return fmt.Errorf("Firestore at %s unreachable: %w", Endpoint(), err)
	default:
		return fmt.Errorf("Firestore at %s refused a read: %w", Endpoint(), err)
	}
}
