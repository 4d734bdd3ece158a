// Writes vectors.json: for each spec, the JSON text Go's encoding/json makes
// of it and its SHA-256 and SHA-1 hex digests, as Radius's controller hashes
// the spec of a DeploymentTemplate (status.statusHash).
//
//	go run . > vectors.json
package main

import (
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
)

// spec has the fields and JSON tags of Radius's DeploymentTemplateSpec
// (radapp.io/v1alpha3), in the same order.
type spec struct {
	Template       string            `json:"template,omitempty"`
	Parameters     map[string]string `json:"parameters,omitempty"`
	ProviderConfig string            `json:"providerConfig,omitempty"`
	Repository     string            `json:"repository,omitempty"`
}

type vector struct {
	Name   string `json:"name"`
	Spec   spec   `json:"spec"`
	JSON   string `json:"json"`
	SHA256 string `json:"sha256"`
	SHA1   string `json:"sha1"`
}

const providerConfig = `{"radius":{"type":"Radius","value":{"scope":"/planes/radius/local/resourceGroups/default"}},"deployments":{"type":"Microsoft.Resources","value":{"scope":"/planes/radius/local/resourceGroups/default"}}}`

func main() {
	template, err := os.ReadFile("../fixtures/arm-templates/deploymenttemplate-outputresources-1.json")
	if err != nil {
		panic(err)
	}
	specs := []struct {
		name string
		spec spec
	}{
		{"empty", spec{}},
		{"template only", spec{Template: `{"resources":{}}`}},
		{"a real template with parameters and provider config", spec{
			Template:       string(template),
			Parameters:     map[string]string{"replicas": "3", "image": "nginx:1.27", "tags": `{"team":"a"}`},
			ProviderConfig: providerConfig,
		}},
		{"keys sorted", spec{Template: "{}", Parameters: map[string]string{"b": "2", "a": "1", "B": "3", "é": "4", "a1": "5"}}},
		{"html escaped", spec{Template: `{"x":"<a href='y'>&amp;</a>"}`, Parameters: map[string]string{"<k>": "a&b"}}},
		{"control characters", spec{Template: "line\nnext\ttab\rret\bback\fform\x01\x1f\x7f"}},
		{"quotes and backslashes", spec{Template: `{"a":"\"quoted\" \\ back"}`, Repository: `https://example.com/"x"`}},
		{"unicode", spec{Template: "héllo ☃ 😀 \u2028 \u2029 \u00a0", ProviderConfig: providerConfig}},
		{"empty values kept, empty map dropped", spec{Parameters: map[string]string{"a": ""}, Repository: "git@example.com:org/repo"}},
		{"empty map", spec{Template: "{}", Parameters: map[string]string{}}},
	}
	var out []vector
	for _, s := range specs {
		b, err := json.Marshal(s.spec)
		if err != nil {
			panic(err)
		}
		sum256 := sha256.Sum256(b)
		sum1 := sha1.Sum(b)
		out = append(out, vector{s.name, s.spec, string(b), hex.EncodeToString(sum256[:]), hex.EncodeToString(sum1[:])})
	}
	encoder := json.NewEncoder(os.Stdout)
	encoder.SetIndent("", "  ")
	if err := encoder.Encode(out); err != nil {
		panic(err)
	}
}
