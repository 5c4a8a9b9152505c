package radclient

// ParseResponse exposes parseResponse to the fuzz target.
var ParseResponse = parseResponse

// EncodeRequest exposes the wire form of a request to tests.
func EncodeRequest(r Request) ([]byte, error) { return r.encode() }
