package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"cloud.google.com/go/firestore"
	run "cloud.google.com/go/run/apiv2"
	"google.golang.org/api/option"
	"google.golang.org/grpc"

	"github.com/google/uuid"

	"github.com/stalesweep/stalesweep/emulator/cloudrunfake"
	"github.com/stalesweep/stalesweep/emulator/gcloudemu"
	"github.com/stalesweep/stalesweep/internal/cloudrun"
	"github.com/stalesweep/stalesweep/internal/firestoreconn"
	"github.com/stalesweep/stalesweep/internal/ledger"
	"github.com/stalesweep/stalesweep/internal/testkit/fsspy"
)

// env is what the measurements share: the emulators, the Cloud Run fake, and a client of it
// whose calls are counted on the wire.
type env struct {
	stops []func()
	fake  *cloudrunfake.Server
	run   *run.ExecutionsClient
	calls atomic.Int64 // GetExecution calls seen by the client interceptor
}

const pubsubEnv = "PUBSUB_EMULATOR_HOST"

func start(ctx context.Context, p *progress) (*env, error) {
	p.section("starting what the bench needs")
	e := &env{}
	if os.Getenv(firestoreconn.EmulatorEnv) == "" {
		emu, err := gcloudemu.Firestore(ctx)
		if err != nil {
			return nil, err
		}
		os.Setenv(firestoreconn.EmulatorEnv, emu.Host)
		e.stops = append(e.stops, func() { _ = emu.Stop(); os.Unsetenv(firestoreconn.EmulatorEnv) })
		p.say("Firestore emulator on %s", emu.Host)
	}
	if os.Getenv(pubsubEnv) == "" {
		emu, err := gcloudemu.PubSub(ctx, "stalesweep-bench")
		if err != nil {
			e.stop(p)
			return nil, err
		}
		os.Setenv(pubsubEnv, emu.Host)
		e.stops = append(e.stops, func() { _ = emu.Stop(); os.Unsetenv(pubsubEnv) })
		p.say("Pub/Sub emulator on %s", emu.Host)
	}
	fake, err := cloudrunfake.NewServer()
	if err != nil {
		e.stop(p)
		return nil, err
	}
	e.fake = fake
	e.stops = append(e.stops, fake.Close)
	count := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		e.calls.Add(1)
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	e.run, err = cloudrun.Dial(ctx, fake.Addr, option.WithGRPCDialOption(grpc.WithChainUnaryInterceptor(count)))
	if err != nil {
		e.stop(p)
		return nil, err
	}
	e.stops = append(e.stops, func() { _ = e.run.Close() })
	p.say("Cloud Run Executions fake on %s", fake.Addr)
	return e, nil
}

func (e *env) stop(p *progress) {
	for i := len(e.stops) - 1; i >= 0; i-- {
		e.stops[i]()
	}
	e.stops = nil
}

// project opens a client on a fresh emulator project, watched by spy when given; close it with
// the returned function, which also clears the project's data.
func project(ctx context.Context, spy *fsspy.Spy) (*firestore.Client, func(), error) {
	fs, _, done, err := projectID(ctx, spy)
	return fs, done, err
}

// projectID is project, also returning the project's id.
func projectID(ctx context.Context, spy *fsspy.Spy) (*firestore.Client, string, func(), error) {
	var b [6]byte
	_, _ = rand.Read(b[:])
	id := "bench-" + hex.EncodeToString(b[:])
	var dial []grpc.DialOption
	if spy != nil {
		dial = spy.DialOptions()
	}
	fs, err := firestoreconn.Open(ctx, firestoreconn.Options{Project: id, DialOptions: dial})
	if err != nil {
		return nil, "", nil, err
	}
	return fs, id, func() {
		_ = fs.Close()
		url := fmt.Sprintf("http://%s/emulator/v1/projects/%s/databases/(default)/documents", os.Getenv(firestoreconn.EmulatorEnv), id)
		req, _ := http.NewRequest(http.MethodDelete, url, nil)
		if resp, err := (&http.Client{Timeout: time.Minute}).Do(req); err == nil {
			resp.Body.Close()
		}
	}, nil
}

// bulk writes documents through a BulkWriter (not atomic, and fast), waiting for all of them.
func bulk(ctx context.Context, fs *firestore.Client, n int, doc func(i int) (*firestore.DocumentRef, any)) error {
	bw := fs.BulkWriter(ctx)
	jobs := make([]*firestore.BulkWriterJob, 0, n)
	for i := range n {
		ref, v := doc(i)
		j, err := bw.Set(ref, v)
		if err != nil {
			return err
		}
		jobs = append(jobs, j)
	}
	bw.End()
	for _, j := range jobs {
		if _, err := j.Results(); err != nil {
			return fmt.Errorf("bulk write: %w", err)
		}
	}
	return nil
}

// newIDs returns n fresh uuids.
func newIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = uuid.NewString()
	}
	return ids
}

// enable writes organizations/{org} with sweeps enabled for every org, in bulk.
func enable(ctx context.Context, fs *firestore.Client, orgs []string) error {
	return bulk(ctx, fs, len(orgs), func(i int) (*firestore.DocumentRef, any) {
		return fs.Collection(ledger.OrganizationsCollection).Doc(orgs[i]), ledger.Organization{UUID: orgs[i], SweepsEnabled: true}
	})
}
