package identity

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
)

// DynamicAPI is the part of the IMDS client that reads dynamic data, where
// the signed instance identity document lives.
type DynamicAPI interface {
	GetDynamicData(ctx context.Context, in *imds.GetDynamicDataInput, optFns ...func(*imds.Options)) (*imds.GetDynamicDataOutput, error)
}

var _ DynamicAPI = (*imds.Client)(nil)

// SignedDocument is the instance identity document exactly as IMDS served
// it, with EC2's signature of those bytes (the base64 "signature" form).
// The agent passes both to the broker untouched: a verifier needs the
// document byte for byte.
type SignedDocument struct {
	Document  []byte
	Signature string
}

// maxDynamic bounds what the agent reads from a dynamic-data path: the
// document and its signature are well under a KiB.
const maxDynamic = 64 << 10

// FetchSignedDocument reads the instance identity document and its
// signature.
func FetchSignedDocument(ctx context.Context, c DynamicAPI) (SignedDocument, error) {
	doc, err := getDynamic(ctx, c, "instance-identity/document")
	if err != nil {
		return SignedDocument{}, err
	}
	sig, err := getDynamic(ctx, c, "instance-identity/signature")
	if err != nil {
		return SignedDocument{}, err
	}
	if len(doc) == 0 || len(sig) == 0 {
		return SignedDocument{}, errors.New("imds: empty instance identity document or signature")
	}
	return SignedDocument{Document: doc, Signature: strings.TrimSpace(string(sig))}, nil
}

func getDynamic(ctx context.Context, c DynamicAPI, path string) ([]byte, error) {
	out, err := c.GetDynamicData(ctx, &imds.GetDynamicDataInput{Path: path})
	if err != nil {
		var se interface{ HTTPStatusCode() int }
		if errors.As(err, &se) && se.HTTPStatusCode() == http.StatusNotFound {
			return nil, fmt.Errorf("imds dynamic/%s: %w", path, ErrNotFound)
		}
		return nil, fmt.Errorf("imds dynamic/%s: %w", path, err)
	}
	defer out.Content.Close()
	b, err := io.ReadAll(io.LimitReader(out.Content, maxDynamic+1))
	if err != nil {
		return nil, fmt.Errorf("imds dynamic/%s: read: %w", path, err)
	}
	if len(b) > maxDynamic {
		return nil, fmt.Errorf("imds dynamic/%s: more than %d bytes", path, maxDynamic)
	}
	return b, nil
}
