// Package kubeapiserver runs a real kube-apiserver, backed by a real etcd, on loopback, for
// integration tests of code that talks to the Kubernetes API (the Kubernetes Jobs adapter).
//
// How faithful: both processes are the released code itself, kube-apiserver v1.37.2 built from
// k8s.io/kubernetes and etcd at the version that release requires (build.sh builds them once into
// a cache outside the repository). Validation, defaulting, the status subresource's transition
// rules (Failed needs FailureTarget, Complete needs SuccessCriteriaMet and completionTime),
// resourceVersion conflicts, field and label selectors, token authentication and RBAC are the
// real ones, which the fake clientset does not enforce.
//
// What is missing is everything outside the API server: no controller-manager, scheduler or
// kubelet runs. So no Job controller creates Pods or writes a Job's status (the test does, through
// the status subresource), no garbage collector removes the "orphan" finalizer that a Job deleted
// with batch/v1's default propagation gets (delete with propagationPolicy Background, as kubectl
// does, and the Job is gone at once), a deleted namespace stays Terminating, and no namespace gets
// a default ServiceAccount — which is why the ServiceAccount admission plugin is disabled here; it
// only admits Pods, so Jobs are unaffected.
//
// Both processes run in their own session and process group next to a watchdog that ends the
// group when the Go process that started them goes away; Stop ends both groups and waits.
package kubeapiserver

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	_ "embed"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/rest"

	"github.com/stalesweep/stalesweep/emulator/procgroup"
)

// KubeVersion is the kube-apiserver release the harness builds and runs.
const KubeVersion = "v1.37.2"

// StartTimeout bounds how long Start waits for etcd and then kube-apiserver to be ready, once
// the binaries exist.
const StartTimeout = 2 * time.Minute

//go:embed build.sh
var buildScript []byte

// CacheDir is where build.sh builds the binaries: $STALESWEEP_KUBE_CACHE, or
// ~/.cache/stalesweep/kube-v1.37.2.
func CacheDir() (string, error) {
	if d := os.Getenv("STALESWEEP_KUBE_CACHE"); d != "" {
		return filepath.Abs(d)
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("find cache dir: %w", err)
	}
	return filepath.Join(home, ".cache", "stalesweep", "kube-"+KubeVersion), nil
}

// Binaries returns the absolute paths of kube-apiserver and etcd, building them first if the
// cache does not hold them (minutes, cold). The script is embedded, so this works from any test
// binary; it is written next to the binaries and its progress goes to log (nil: discarded).
func Binaries(ctx context.Context, log io.Writer) (apiserver, etcd string, err error) {
	if log == nil {
		log = io.Discard
	}
	dir, err := CacheDir()
	if err != nil {
		return "", "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", fmt.Errorf("create cache dir: %w", err)
	}
	script := filepath.Join(dir, "build.sh")
	// Replaced by rename, never rewritten in place: bash reads a script as it runs it, and another
	// test binary may be running this one.
	if old, err := os.ReadFile(script); err != nil || !bytes.Equal(old, buildScript) {
		tmp := fmt.Sprintf("%s.%d", script, os.Getpid())
		if err := os.WriteFile(tmp, buildScript, 0o755); err != nil {
			return "", "", fmt.Errorf("write build script: %w", err)
		}
		if err := os.Rename(tmp, script); err != nil {
			return "", "", fmt.Errorf("write build script: %w", err)
		}
	}
	var stdout bytes.Buffer
	errTail := procgroup.NewTail(16 << 10)
	cmd := exec.CommandContext(ctx, "bash", script)
	cmd.Env = append(os.Environ(), "STALESWEEP_KUBE_CACHE="+dir)
	cmd.Stdout = &stdout
	cmd.Stderr = io.MultiWriter(log, errTail)
	// Its own group, so cancelling ctx ends the compilers too, not only bash.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		return "", "", fmt.Errorf("build kube-apiserver and etcd: %w; build.sh's output:\n%s", err, errTail.String())
	}
	lines := strings.Fields(stdout.String())
	if len(lines) < 2 {
		return "", "", fmt.Errorf("build kube-apiserver and etcd: build.sh printed %q, not two paths", stdout.String())
	}
	apiserver, etcd = lines[len(lines)-2], lines[len(lines)-1]
	for _, p := range []string{apiserver, etcd} {
		if _, err := os.Stat(p); err != nil {
			return "", "", fmt.Errorf("build kube-apiserver and etcd: %w", err)
		}
	}
	return apiserver, etcd, nil
}

// User is an identity the server authenticates by a static bearer token.
type User struct {
	Name   string
	Groups []string
}

// Server is a running kube-apiserver and its etcd, which this process started.
type Server struct {
	// URL is the API server's https://127.0.0.1:port.
	URL string
	// CAData is the PEM CA that signed the serving certificate, for TLS that verifies the server.
	CAData []byte
	// Tokens maps each user's name to its bearer token; "admin" (group system:masters) is always
	// there.
	Tokens map[string]string
	// EtcdURL is etcd's client URL, for tests that look under the API server.
	EtcdURL string

	dir       string
	etcd      *procgroup.Proc
	apiserver *procgroup.Proc
}

// Start builds the binaries if needed, then starts etcd and kube-apiserver on free loopback
// ports with a fresh data directory, static tokens for users plus "admin", RBAC authorization,
// and waits until /readyz answers ok. ctx bounds the build and the start, not the server's life:
// call Stop.
func Start(ctx context.Context, users []User, log io.Writer) (*Server, error) {
	if log == nil {
		log = io.Discard
	}
	apiserverBin, etcdBin, err := Binaries(ctx, log)
	if err != nil {
		return nil, err
	}
	began := time.Now()
	ctx, cancel := context.WithTimeout(ctx, StartTimeout)
	defer cancel()

	users = append([]User{{Name: "admin", Groups: []string{"system:masters"}}}, users...)
	tokens := map[string]string{}
	var tokenFile strings.Builder
	for _, u := range users {
		if u.Name == "" || strings.ContainsAny(u.Name+strings.Join(u.Groups, ""), ",\"\n") {
			return nil, fmt.Errorf("start kube-apiserver: user name %q or its groups empty or with , or \"", u.Name)
		}
		if _, dup := tokens[u.Name]; dup {
			return nil, fmt.Errorf("start kube-apiserver: user %q given twice", u.Name)
		}
		tokens[u.Name] = randomToken()
		// token,user,uid[,"group1,group2"]
		fmt.Fprintf(&tokenFile, "%s,%s,%s", tokens[u.Name], u.Name, u.Name)
		if len(u.Groups) > 0 {
			fmt.Fprintf(&tokenFile, `,"%s"`, strings.Join(u.Groups, ","))
		}
		tokenFile.WriteString("\n")
	}

	dir, err := os.MkdirTemp("", "kubeapiserver-")
	if err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	s := &Server{Tokens: tokens, dir: dir}
	fail := func(err error) (*Server, error) {
		_ = s.Stop()
		return nil, err
	}
	caPEM, err := writeCredentials(dir)
	if err != nil {
		return fail(err)
	}
	s.CAData = caPEM
	if err := os.WriteFile(filepath.Join(dir, "tokens.csv"), []byte(tokenFile.String()), 0o600); err != nil {
		return fail(fmt.Errorf("write token file: %w", err))
	}

	ports, err := procgroup.FreePorts(3)
	if err != nil {
		return fail(err)
	}
	s.EtcdURL = "http://127.0.0.1:" + strconv.Itoa(ports[0])
	peerURL := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	s.URL = "https://127.0.0.1:" + strconv.Itoa(ports[2])

	// --unsafe-no-fsync: a throwaway test store needs no durability, and fsync dominates its writes.
	// etcd's watchdog also removes the data directory once etcd is gone.
	s.etcd, err = procgroup.Start("etcd", etcdBin, procgroup.Options{Dir: dir, LogMax: 256 << 10, Cleanup: dir},
		"--name=default", "--data-dir="+filepath.Join(dir, "etcd"),
		"--listen-client-urls="+s.EtcdURL, "--advertise-client-urls="+s.EtcdURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=default="+peerURL, "--initial-cluster-state=new",
		"--unsafe-no-fsync", "--log-level=warn")
	if err != nil {
		return fail(err)
	}
	if err := s.etcd.WaitHTTP(ctx, http.DefaultClient, s.EtcdURL+"/health", "", `"health":"true"`); err != nil {
		return fail(fmt.Errorf("start etcd on %s: %w; its output:\n%s", s.EtcdURL, err, s.etcd.LastLogs(8<<10)))
	}

	p := func(name string) string { return filepath.Join(dir, name) }
	s.apiserver, err = procgroup.Start("kube-apiserver", apiserverBin, procgroup.Options{Dir: dir, LogMax: 256 << 10},
		"--etcd-servers="+s.EtcdURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--secure-port="+strconv.Itoa(ports[2]),
		"--tls-cert-file="+p("serving.crt"), "--tls-private-key-file="+p("serving.key"),
		"--cert-dir="+p("certs"),
		"--token-auth-file="+p("tokens.csv"),
		"--authorization-mode=RBAC",
		// No controller-manager creates the default ServiceAccount of a namespace, which this
		// plugin requires of every Pod. It does not look at Jobs.
		"--disable-admission-plugins=ServiceAccount",
		// On loopback the endpoint reconciler cannot publish 127.0.0.1 as the kubernetes
		// service's endpoint, and the server fails to start.
		"--endpoint-reconciler-type=none",
		"--service-cluster-ip-range=10.0.0.0/24",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+p("sa.pub"), "--service-account-signing-key-file="+p("sa.key"),
		"--profiling=false")
	if err != nil {
		return fail(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	if err := s.apiserver.WaitHTTP(ctx, client, s.URL+"/readyz", tokens["admin"], "ok"); err != nil {
		return fail(fmt.Errorf("start kube-apiserver on %s: %w; its output:\n%s\netcd's output:\n%s",
			s.URL, err, s.apiserver.LastLogs(16<<10), s.etcd.LastLogs(4<<10)))
	}
	fmt.Fprintf(log, "kubeapiserver: kube-apiserver %s ready at %s in %s\n", KubeVersion, s.URL, time.Since(began).Round(time.Millisecond))
	return s, nil
}

// RESTConfig returns a client config that authenticates as user by its bearer token and verifies
// the server with CAData. Client-side throttling is raised from client-go's 5 QPS so that tests
// are not slowed by it. It panics for a user Start was not given: a mistake in the test.
func (s *Server) RESTConfig(user string) *rest.Config {
	token, ok := s.Tokens[user]
	if !ok {
		panic(fmt.Sprintf("kubeapiserver: no user %q: Start was not given it", user))
	}
	return &rest.Config{
		Host:            s.URL,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAData: bytes.Clone(s.CAData)},
		QPS:             100,
		Burst:           200,
		Timeout:         30 * time.Second,
	}
}

// Stop ends kube-apiserver, then etcd, waits until both process groups are gone and removes the
// data directory. It can be called more than once.
func (s *Server) Stop() error {
	var errs []error
	for _, p := range []*procgroup.Proc{s.apiserver, s.etcd} {
		if p != nil {
			errs = append(errs, p.Stop())
		}
	}
	if s.dir != "" {
		if err := os.RemoveAll(s.dir); err != nil {
			errs = append(errs, fmt.Errorf("remove data dir: %w", err))
		}
	}
	return errors.Join(errs...)
}

// writeCredentials writes into dir a CA and a serving certificate it signed for 127.0.0.1 (the
// API server's own, so clients verify it), and the service-account signing key pair; it returns
// the CA's PEM.
func writeCredentials(dir string) ([]byte, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate CA key: %w", err)
	}
	now := time.Now()
	ca := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "stalesweep-kubeapiserver-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(7 * 24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, BasicConstraintsValid: true, IsCA: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("create CA certificate: %w", err)
	}
	serveKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate serving key: %w", err)
	}
	serve := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "kube-apiserver"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(7 * 24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback, net.IPv4(10, 0, 0, 1)},
		DNSNames:    []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, fmt.Errorf("parse CA certificate: %w", err)
	}
	serveDER, err := x509.CreateCertificate(rand.Reader, serve, caCert, &serveKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("create serving certificate: %w", err)
	}
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate service-account key: %w", err)
	}
	serveKeyDER, _ := x509.MarshalECPrivateKey(serveKey)
	saKeyDER, _ := x509.MarshalECPrivateKey(saKey)
	saPubDER, _ := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	files := map[string][]byte{
		"ca.crt":      caPEM,
		"serving.crt": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: serveDER}),
		"serving.key": pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: serveKeyDER}),
		"sa.key":      pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: saKeyDER}),
		"sa.pub":      pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: saPubDER}),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return nil, fmt.Errorf("write %s: %w", name, err)
		}
	}
	return caPEM, nil
}

func randomToken() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}
