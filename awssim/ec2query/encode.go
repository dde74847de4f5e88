package ec2query

import (
	"bytes"
	"encoding/xml"
	"net/http"
)

// Namespace is the XML namespace of EC2 API version 2016-11-15.
const Namespace = "http://ec2.amazonaws.com/doc/2016-11-15/"

// Meta is embedded first in every response body type; it carries the
// request ID that EC2 puts in every answer.
type Meta struct {
	RequestID string `xml:"requestId"`
}

func (m *Meta) setRequestID(id string) { m.RequestID = id }

// Body is a response body type: a struct embedding Meta whose other fields
// are the response's child elements (list members tagged "xxxSet>item").
type Body interface{ setRequestID(string) }

// MarshalResponse encodes body as <ActionResponse xmlns=…>.
func MarshalResponse(action, requestID string, body Body) ([]byte, error) {
	body.setRequestID(requestID)
	var buf bytes.Buffer
	buf.WriteString(xml.Header)
	enc := xml.NewEncoder(&buf)
	start := xml.StartElement{
		Name: xml.Name{Local: action + "Response"},
		Attr: []xml.Attr{{Name: xml.Name{Local: "xmlns"}, Value: Namespace}},
	}
	if err := enc.EncodeElement(body, start); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// WriteResponse writes a 200 response with body encoded for action.
func WriteResponse(w http.ResponseWriter, action, requestID string, body Body) error {
	b, err := MarshalResponse(action, requestID, body)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	w.WriteHeader(http.StatusOK)
	_, err = w.Write(b)
	return err
}

type errorBody struct {
	XMLName   xml.Name `xml:"Response"`
	Errors    []Error  `xml:"Errors>Error"`
	RequestID string   `xml:"RequestID"`
}

// MarshalError encodes e as EC2's error body.
func MarshalError(requestID string, e *Error) []byte {
	var buf bytes.Buffer
	buf.WriteString(xml.Header)
	// Marshalling plain strings cannot fail.
	b, _ := xml.Marshal(errorBody{Errors: []Error{*e}, RequestID: requestID})
	buf.Write(b)
	return buf.Bytes()
}

// WriteError writes e with its HTTP status.
func WriteError(w http.ResponseWriter, requestID string, e *Error) {
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	status := e.Status
	if status == 0 {
		status = http.StatusBadRequest
	}
	w.WriteHeader(status)
	_, _ = w.Write(MarshalError(requestID, e))
}
