package imds

import (
	"crypto/rand"
	"encoding/base64"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

const (
	tokenPath      = "/latest/api/token"
	metaDataPath   = "/latest/meta-data"
	identityDir    = "/latest/dynamic/instance-identity"
	identityPath   = identityDir + "/document"
	signaturePath  = identityDir + "/signature"
	tokenHeader    = "X-Aws-Ec2-Metadata-Token"
	tokenTTLHeader = "X-Aws-Ec2-Metadata-Token-Ttl-Seconds"
	maxTokenTTL    = 21600 // seconds, as IMDS enforces
)

// handler serves IMDS for one instance.
type handler struct {
	instanceID string
	src        Source
	opts       Options
	log        *slog.Logger
	now        func() time.Time // replaced in tests to expire tokens

	mu     sync.Mutex
	tokens map[string]time.Time // token -> expiry
}

// NewHandler returns the IMDS HTTP handler for instanceID, showing what src
// reports for it.
func NewHandler(instanceID string, src Source, opts Options) http.Handler {
	return newHandler(instanceID, src, opts)
}

func newHandler(instanceID string, src Source, opts Options) *handler {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &handler{
		instanceID: instanceID,
		src:        src,
		opts:       opts,
		log:        log.With("component", "imds", "instance", instanceID),
		now:        time.Now,
		tokens:     map[string]time.Time{},
	}
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	status := h.serve(w, r)
	h.log.Debug("imds request", "method", r.Method, "path", r.URL.Path, "status", status)
}

func (h *handler) serve(w http.ResponseWriter, r *http.Request) int {
	if r.URL.Path == tokenPath {
		return h.serveToken(w, r)
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return h.fail(w, http.StatusMethodNotAllowed)
	}
	if status, ok := h.authorize(r); !ok {
		return h.fail(w, status)
	}
	md, ok := h.src.Metadata(h.instanceID)
	if !ok {
		return h.fail(w, http.StatusNotFound)
	}
	p := r.URL.Path
	switch {
	case p == identityPath:
		return h.ok(w, identityDocument(md))
	case p == signaturePath && h.opts.Signer != nil:
		sig, err := h.opts.Signer.Sign([]byte(identityDocument(md)))
		if err != nil {
			h.log.Error("sign identity document", "err", err)
			return h.fail(w, http.StatusInternalServerError)
		}
		return h.ok(w, sig)
	case strings.TrimSuffix(p, "/") == identityDir:
		if h.opts.Signer == nil {
			return h.ok(w, "document")
		}
		return h.ok(w, "document\nsignature")
	case p == metaDataPath || strings.HasPrefix(p, metaDataPath+"/"):
		n, found := metaDataTree(md).lookup(strings.TrimPrefix(p, metaDataPath))
		if !found {
			return h.fail(w, http.StatusNotFound)
		}
		return h.ok(w, n.body())
	default:
		return h.fail(w, http.StatusNotFound)
	}
}

// serveToken issues an IMDSv2 session token. The TTL header is mandatory and
// is echoed back: the SDK reads the token's lifetime from the response.
func (h *handler) serveToken(w http.ResponseWriter, r *http.Request) int {
	if r.Method != http.MethodPut {
		return h.fail(w, http.StatusMethodNotAllowed)
	}
	// IMDS refuses token requests that went through a proxy, so a token
	// can't be fetched on behalf of something off the instance.
	if r.Header.Get("X-Forwarded-For") != "" {
		return h.fail(w, http.StatusForbidden)
	}
	raw := r.Header.Get(tokenTTLHeader)
	ttl, err := strconv.Atoi(raw)
	if err != nil || ttl < 1 || ttl > maxTokenTTL {
		return h.fail(w, http.StatusBadRequest)
	}
	var b [32]byte
	_, _ = rand.Read(b[:])
	tok := base64.RawURLEncoding.EncodeToString(b[:])

	now := h.now()
	h.mu.Lock()
	for t, exp := range h.tokens {
		if !now.Before(exp) {
			delete(h.tokens, t)
		}
	}
	h.tokens[tok] = now.Add(time.Duration(ttl) * time.Second)
	h.mu.Unlock()

	w.Header().Set(tokenTTLHeader, strconv.Itoa(ttl))
	return h.ok(w, tok)
}

// authorize checks the session token. A token that is presented must be
// valid even when tokens are optional, as with real IMDS.
func (h *handler) authorize(r *http.Request) (int, bool) {
	tok := r.Header.Get(tokenHeader)
	if tok == "" {
		if h.opts.TokenRequired {
			return http.StatusUnauthorized, false
		}
		return 0, true
	}
	h.mu.Lock()
	exp, ok := h.tokens[tok]
	h.mu.Unlock()
	if !ok || !h.now().Before(exp) {
		return http.StatusUnauthorized, false
	}
	return 0, true
}

func (h *handler) ok(w http.ResponseWriter, body string) int {
	w.Header().Set("Content-Type", "text/plain")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, body)
	return http.StatusOK
}

func (h *handler) fail(w http.ResponseWriter, status int) int {
	http.Error(w, http.StatusText(status), status)
	return status
}
