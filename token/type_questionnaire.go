package token

import (
	"context"
	"encoding/json"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/internal/secret"
)

// Questionnaire is the security questions token (prefix QUST): a correct
// PIN is answered with one of the user's questions, and the reply must be
// the answer given at enrollment.
type Questionnaire struct{}

var (
	_ Type       = Questionnaire{}
	_ Challenger = Questionnaire{}
	_ Adopter    = Questionnaire{}
)

// FieldAnswers is the sealed field with the questionnaire answers, a JSON
// array in the order of the "question.<n>" tokeninfo entries.
const FieldAnswers = "answers"

// InfoQuestionPrefix prefixes the tokeninfo keys of the question texts
// ("question.0", "question.1", …).
const InfoQuestionPrefix = "question."

const (
	maxQuestions      = 50
	maxQuestionLength = 1024
)

// Name implements Type.
func (Questionnaire) Name() string { return "question" }

// legacyQuestionType is the name records written before the type took
// privacyIDEA's name "question" carry; the codec reads it as "question".
const legacyQuestionType = "questionnaire"

// Prefix implements Type.
func (Questionnaire) Prefix() string { return "QUST" }

// Enroll implements Type: "questions" is a JSON object mapping each
// question to its answer; at least question.num_answers (1) and at most 50
// non-empty pairs. The questions are stored as tokeninfo "question.<n>",
// sorted by text so the numbering is stable; the answers are sealed
// together. Nothing is returned in the detail.
func (Questionnaire) Enroll(ctx context.Context, e *Enroll) error {
	// The system setting question.num_answers is the least number of
	// answers; the request may ask for more, never for fewer.
	least, err := intParam(Params{"question.num_answers": e.Service.settings().Value("question.num_answers")}, "question.num_answers", 1, 1, maxQuestions)
	if err != nil {
		return err
	}
	return enrollQuestions(e, least)
}

// Adopt implements Adopter: as Enroll, but the questions a token adopted
// from another system has are kept even when they are fewer than
// question.num_answers asks of a new token.
func (Questionnaire) Adopt(ctx context.Context, e *Enroll) error { return enrollQuestions(e, 1) }

// enrollQuestions reads "questions", at least least of them.
func enrollQuestions(e *Enroll, least int) error {
	p, t := e.Params, e.Token
	raw := strings.TrimSpace(p.Str("questions"))
	if raw == "" {
		return apierr.MissingParameter("questions")
	}
	need, err := intParam(p, "question.num_answers", least, 1, maxQuestions)
	if err != nil {
		return err
	}
	need = max(need, least)
	var qa map[string]string
	if err := json.Unmarshal([]byte(raw), &qa); err != nil {
		return paramErr("questions must be a JSON object mapping each question to its answer")
	}
	if len(qa) < need {
		return paramErr("at least %d questions with answers are required", need)
	}
	if len(qa) > maxQuestions {
		return paramErr("at most %d questions are possible", maxQuestions)
	}
	questions := make([]string, 0, len(qa))
	for q, a := range qa {
		if strings.TrimSpace(q) == "" || a == "" {
			return paramErr("every question needs a text and a non-empty answer")
		}
		if utf8.RuneCountInString(q) > maxQuestionLength || utf8.RuneCountInString(a) > maxQuestionLength {
			return paramErr("questions and answers may have at most %d characters", maxQuestionLength)
		}
		questions = append(questions, q)
	}
	slices.Sort(questions)
	answers := make([]string, len(questions))
	for k := range t.Info {
		if _, ok := questionIndex(k); ok {
			delete(t.Info, k)
		}
	}
	for i, q := range questions {
		t.SetInfo(InfoQuestionPrefix+strconv.Itoa(i), q)
		answers[i] = qa[q]
	}
	enc, err := json.Marshal(answers)
	if err != nil {
		return err
	}
	e.SetSecret(FieldAnswers, enc)
	return nil
}

// questionIndex reads n from a "question.<n>" tokeninfo key.
func questionIndex(key string) (int, bool) {
	s, ok := strings.CutPrefix(key, InfoQuestionPrefix)
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	return n, err == nil && n >= 0 && strconv.Itoa(n) == s
}

// questionCount returns how many consecutive questions 0 … n-1 t has.
func questionCount(t *Token) int {
	n := 0
	for {
		if _, ok := t.Info[InfoQuestionPrefix+strconv.Itoa(n)]; !ok {
			return n
		}
		n++
	}
}

// Challenge implements Challenger: one question chosen at random; its text
// is the message and its index the stored challenge.
func (Questionnaire) Challenge(ctx context.Context, c *ChallengeRequest) (*ChallengeResult, error) {
	n := questionCount(c.Token)
	if n == 0 {
		return nil, apierr.New(apierr.TokenAdmin, "The questionnaire token has no questions")
	}
	i, err := randInt(c.Service.Rand(), big.NewInt(int64(n)))
	if err != nil {
		return nil, err
	}
	idx := strconv.FormatInt(i.Int64(), 10)
	return &ChallengeResult{
		Message:   c.Token.Info[InfoQuestionPrefix+idx],
		Challenge: idx,
	}, nil
}

// Check implements Type: only an answer to a stored, unexpired challenge
// of this token can match; the reply must equal the answer of the asked
// question exactly (case-sensitive, constant-time).
func (Questionnaire) Check(ctx context.Context, c *Check) (Match, error) {
	ch := c.Challenge
	if ch == nil || ch.Serial != c.Token.Serial || !c.Now.Before(ch.Expiration) {
		return Match{Counter: -1}, nil
	}
	idx, ok := questionIndex(InfoQuestionPrefix + strings.TrimSpace(ch.Challenge))
	if !ok {
		return Match{Counter: -1}, nil
	}
	raw, err := c.Service.Secret(c.Token, FieldAnswers)
	if err != nil || raw == nil {
		return Match{Counter: -1}, err
	}
	var answers []string
	if err := json.Unmarshal(raw, &answers); err != nil {
		return Match{Counter: -1}, ErrCorrupt
	}
	if idx >= len(answers) {
		return Match{Counter: -1}, nil
	}
	return Match{OK: secret.EqualString(answers[idx], c.OTP), Counter: -1}, nil
}

// ChallengesOnPIN implements PINChallenger: a correct PIN alone sends a challenge.
func (Questionnaire) ChallengesOnPIN() bool { return true }
