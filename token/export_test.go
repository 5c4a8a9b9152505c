package token

// DecodeRecord and EncodeRecord expose the stored record's codec to the
// external tests that edit a record in the store.
var (
	DecodeRecord = decodeRecord
	EncodeRecord = encodeRecord
)
