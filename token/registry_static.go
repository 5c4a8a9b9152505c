package token

// staticTypes are the types that need no network.
func staticTypes() []Type {
	return []Type{
		MOTP{}, DayPassword{}, SPass{}, PW{}, Registration{}, ApplSpec{},
		Paper{}, TAN{}, IndexedSecret{}, Questionnaire{}, SSHKeyToken{},
	}
}
