package kubejobs

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stalesweep/stalesweep/internal/executor"
)

// client-go retries a request on its own when the answer is a 429 or 5xx with Retry-After (up
// to 10 times unless told otherwise). By default the adapter turns that off, so a 429 reaches the
// workflow at once and a 503 is retried by the adapter's policy alone; ClientRetries turns it
// back on, request by request.
func TestOnlyThePolicyRetriesUnlessClientRetriesAreSet(t *testing.T) {
	tests := []struct {
		name          string
		status        int
		clientRetries int
		code          codes.Code
		requests      int64
	}{
		{"429 with Retry-After: one request, ResourceExhausted", http.StatusTooManyRequests, 0, codes.ResourceExhausted, 1},
		{"503 with Retry-After: the policy's attempts, one request each", http.StatusServiceUnavailable, 0, codes.Unavailable, executor.MaxAttemptsDefault},
		{"429 with client retries: client-go's retries", http.StatusTooManyRequests, 2, codes.ResourceExhausted, 3},
		{"503 with client retries: client-go's, inside each of the policy's", http.StatusServiceUnavailable, 1, codes.Unavailable, 2 * executor.MaxAttemptsDefault},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var requests atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				requests.Add(1)
				w.Header().Set("Retry-After", "0")
				http.Error(w, "busy", tt.status)
			}))
			defer srv.Close()
			clusters, err := ParseClusters(`{"clusters": {"eu": {"host": "` + srv.URL + `"}}}`)
			if err != nil {
				t.Fatal(err)
			}
			a := New(NewSet(SetConfig{Clusters: clusters, Client: ClientConfig{ClientRetries: tt.clientRetries}}), Config{Backoff: time.Millisecond})
			_, err = a.Observe(context.Background(), ref(runningJob("build-1")))
			if status.Code(err) != tt.code || requests.Load() != tt.requests {
				t.Errorf("code %s after %d requests (%v), want %s after %d", status.Code(err), requests.Load(), err, tt.code, tt.requests)
			}
		})
	}
}

// The client-side rate limit is the ClientConfig's, sized for the workflow, not client-go's
// 5 QPS and burst 10; a negative QPS turns it off.
func TestClientSettingsReachTheRESTConfig(t *testing.T) {
	c := ClusterConfig{Host: "https://127.0.0.1:6443"}
	tests := []struct {
		in      ClientConfig
		qps     float32
		burst   int
		timeout time.Duration
	}{
		{ClientConfig{}, QPSDefault, BurstDefault, RequestTimeoutDefault},
		{ClientConfig{QPS: 7, Burst: 9, Timeout: time.Second}, 7, 9, time.Second},
		{ClientConfig{QPS: -1}, -1, BurstDefault, RequestTimeoutDefault},
	}
	for _, tt := range tests {
		cfg, err := c.RESTConfig(context.Background(), tt.in)
		if err != nil || cfg.QPS != tt.qps || cfg.Burst != tt.burst || cfg.Timeout != tt.timeout || cfg.RateLimiter != nil {
			t.Errorf("%+v: rest config qps %v burst %d timeout %s limiter %v (%v), want %v %d %s",
				tt.in, cfg.QPS, cfg.Burst, cfg.Timeout, cfg.RateLimiter, err, tt.qps, tt.burst, tt.timeout)
		}
	}
}
