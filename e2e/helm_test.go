//go:build deploy

package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"

	"github.com/mcp-sealer/sealer/internal/testenv"
)

const chartDir = "../deploy/helm/sealer"

// helmEnv returns the Helm binary and the Kubernetes API schema document
// (swagger.json of the pinned k8s.io/kubernetes module) and version that
// the test command provides; it fails under CI when they are missing.
func helmEnv(t *testing.T) (helm, swagger, kubeVersion string) {
	t.Helper()
	helm, swagger, kubeVersion = os.Getenv("SEALER_TEST_HELM"), os.Getenv("SEALER_TEST_KUBE_OPENAPI"), os.Getenv("SEALER_TEST_KUBE_VERSION")
	_, errH := os.Stat(helm)
	_, errS := os.Stat(swagger)
	if helm == "" || swagger == "" || kubeVersion == "" || errH != nil || errS != nil {
		testenv.Missing(t, "no Helm or Kubernetes API schemas (SEALER_TEST_HELM=%q, SEALER_TEST_KUBE_OPENAPI=%q, SEALER_TEST_KUBE_VERSION=%q)", helm, swagger, kubeVersion)
	}
	return helm, swagger, kubeVersion
}

// kubeSchemas validates objects against the definitions of a Kubernetes
// OpenAPI v2 document, strictly: a field the API does not define is an
// error, as with kubectl's strict field validation.
type kubeSchemas struct {
	byGVK map[string]*jsonschema.Schema // "group/version/Kind"
	meta  *jsonschema.Schema            // ObjectMeta, for custom resources
}

func loadKubeSchemas(t *testing.T, path string) *kubeSchemas {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Definitions map[string]map[string]any `json:"definitions"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	defs := doc.Definitions
	// The document's two formats that are not JSON types: an int-or-string
	// and a quantity are written as either in manifests.
	defs["io.k8s.apimachinery.pkg.util.intstr.IntOrString"] = map[string]any{"type": []any{"string", "integer"}}
	defs["io.k8s.apimachinery.pkg.api.resource.Quantity"] = map[string]any{"type": []any{"string", "number"}}
	for _, d := range defs {
		strict(d)
	}
	gvks := map[string]string{}
	for name, d := range defs {
		list, _ := d["x-kubernetes-group-version-kind"].([]any)
		for _, g := range list {
			g, _ := g.(map[string]any)
			gvks[fmt.Sprintf("%s/%s/%s", g["group"], g["version"], g["kind"])] = name
		}
	}
	const url = "file:///kubernetes-api.json"
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft4)
	raw, _ := json.Marshal(map[string]any{"definitions": defs})
	res, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.AddResource(url, res); err != nil {
		t.Fatal(err)
	}
	compile := func(def string) *jsonschema.Schema {
		s, err := c.Compile(url + "#/definitions/" + def)
		if err != nil {
			t.Fatalf("compiling %s: %v", def, err)
		}
		return s
	}
	ks := &kubeSchemas{byGVK: map[string]*jsonschema.Schema{}, meta: compile("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta")}
	for gvk, def := range gvks {
		ks.byGVK[gvk] = compile(def)
	}
	return ks
}

// strict forbids properties a schema does not list, in every nested object
// schema with properties of its own.
func strict(s any) {
	switch s := s.(type) {
	case map[string]any:
		if _, ok := s["properties"]; ok {
			if _, ok := s["additionalProperties"]; !ok {
				s["additionalProperties"] = false
			}
		}
		for k, v := range s {
			if k != "x-kubernetes-group-version-kind" {
				strict(v)
			}
		}
	case []any:
		for _, v := range s {
			strict(v)
		}
	}
}

// customResources are the kinds the chart may render that the Kubernetes API
// does not define (Prometheus Operator CRDs): only their metadata is checked
// against the API's ObjectMeta.
var customResources = map[string]bool{"monitoring.coreos.com/v1/ServiceMonitor": true, "monitoring.coreos.com/v1/PrometheusRule": true}

// validate checks every object of a multi-document manifest and returns
// "apiVersion Kind name" of each valid one, and the problems of the others.
func (ks *kubeSchemas) validate(t *testing.T, manifest []byte) (objects []string, problems []error) {
	t.Helper()
	dec := yaml.NewDecoder(bytes.NewReader(manifest))
	for {
		var obj map[string]any
		err := dec.Decode(&obj)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("rendered manifest is not YAML: %v", err)
		}
		if obj == nil {
			continue
		}
		// Through JSON, as the API server reads it.
		raw, err := json.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		apiVersion, _ := obj["apiVersion"].(string)
		kind, _ := obj["kind"].(string)
		meta, _ := obj["metadata"].(map[string]any)
		name, _ := meta["name"].(string)
		group, version := "", apiVersion
		if i := strings.Index(apiVersion, "/"); i >= 0 {
			group, version = apiVersion[:i], apiVersion[i+1:]
		}
		gvk := group + "/" + version + "/" + kind
		id := apiVersion + " " + kind + " " + name
		if customResources[gvk] {
			m, _ := json.Marshal(meta)
			mi, _ := jsonschema.UnmarshalJSON(bytes.NewReader(m))
			if err := ks.meta.Validate(mi); err != nil {
				problems = append(problems, fmt.Errorf("%s: metadata: %v", id, err))
				continue
			}
			objects = append(objects, id+" (custom resource: metadata checked)")
			continue
		}
		s, ok := ks.byGVK[gvk]
		if !ok {
			problems = append(problems, fmt.Errorf("%s: no such kind in the Kubernetes API", id))
			continue
		}
		if err := s.Validate(inst); err != nil {
			problems = append(problems, fmt.Errorf("%s does not match the Kubernetes API schema: %v", id, err))
			continue
		}
		objects = append(objects, id)
	}
	return objects, problems
}

func helmRun(helm string, args ...string) ([]byte, error) {
	cmd := exec.Command(helm, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("%v: %s", err, stderr.String())
	}
	return out, nil
}

// TestHelmChart lints the chart, renders it for the default and
// production-like values and validates every object against the Kubernetes
// API schemas of the pinned version, offline; and checks that it refuses
// several replicas with per-pod keys or the embedded ledger.
func TestHelmChart(t *testing.T) {
	testenv.Lane(t, testenv.LaneDeploy)
	helm, swagger, kubeVersion := helmEnv(t)
	ks := loadKubeSchemas(t, swagger)
	t.Logf("Kubernetes API schemas of v%s: %d kinds", kubeVersion, len(ks.byGVK))
	prod := filepath.Join(chartDir, "ci", "production-values.yaml")

	// The validator itself refuses what the API server would.
	for _, bad := range []string{
		"apiVersion: v1\nkind: Service\nmetadata: {name: a}\nspec: {ports: [{port: 80, targetPrt: 8080}]}\n",
		"apiVersion: v1\nkind: Service\nmetadata: {name: a}\nspec: {ports: [{port: \"80\"}]}\n",
		"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: a, annotations: null}\nspec: {selector: {}, template: {}}\n",
		"apiVersion: apps/v1beta1\nkind: Deployment\nmetadata: {name: a}\n",
		"apiVersion: monitoring.coreos.com/v1\nkind: PrometheusRule\nmetadata: {name: a, labels: {a: 1}}\n",
	} {
		if objects, problems := ks.validate(t, []byte(bad)); len(objects) != 0 || len(problems) != 1 {
			t.Errorf("the validator accepted %q: %v %v", bad, objects, problems)
		}
	}
	ok, problems := ks.validate(t, []byte("apiVersion: v1\nkind: Service\nmetadata: {name: a}\nspec: {ports: [{port: 80, targetPort: http}, {port: 81, targetPort: 8081}]}\n"))
	if len(ok) != 1 || len(problems) != 0 {
		t.Errorf("the validator refused a valid Service: %v", problems)
	}

	for _, values := range [][]string{nil, {"-f", prod}} {
		args := append([]string{"lint", "--strict", "--kube-version", kubeVersion, chartDir}, values...)
		out, err := helmRun(helm, args...)
		if err != nil {
			t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		t.Logf("helm %s: %s", strings.Join(args, " "), lastLine(out))
	}

	cases := []struct {
		name   string
		values []string
		kinds  []string
	}{
		{"default values", nil, []string{"Deployment", "NetworkPolicy", "PodDisruptionBudget", "Service", "ServiceAccount"}},
		{"production values", []string{"-f", prod}, []string{"Deployment", "NetworkPolicy", "PodDisruptionBudget", "PrometheusRule", "Service", "ServiceAccount", "ServiceMonitor"}},
		{"one replica, embedded keys and ledger, inline tenants", []string{"--set", "replicaCount=1", "--set", "keys.source=file", "--set", "ledger.type=embedded",
			"--set", "tenants.secretName=", "--set", "tenants.inline.tenants.team-a.tokens[0]=sha256:5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8"},
			[]string{"ConfigMap", "Deployment", "NetworkPolicy", "PodDisruptionBudget", "Service", "ServiceAccount"}},
	}
	for _, c := range cases {
		args := append([]string{"template", "sealer", chartDir, "--namespace", "mcp", "--kube-version", kubeVersion}, c.values...)
		out, err := helmRun(helm, args...)
		if err != nil {
			t.Fatalf("%s: helm template: %v", c.name, err)
		}
		objects, problems := ks.validate(t, out)
		for _, p := range problems {
			t.Errorf("%s: %v", c.name, p)
		}
		var kinds []string
		for _, o := range objects {
			kinds = append(kinds, strings.Fields(o)[1])
		}
		sort.Strings(kinds)
		if strings.Join(kinds, " ") != strings.Join(c.kinds, " ") {
			t.Errorf("%s: rendered kinds %v, want %v", c.name, kinds, c.kinds)
		}
		t.Logf("%s: %d objects valid against the Kubernetes v%s API:\n  %s", c.name, len(objects), kubeVersion, strings.Join(objects, "\n  "))
		checkDeployment(t, c.name, out)
	}

	refusals := []struct {
		name, want string
		values     []string
	}{
		{"3 replicas, per-pod generated key file", "no keys.file.secretName", []string{"--set", "keys.source=file"}},
		{"3 replicas, embedded ledger", "ledger.type=embedded", []string{"--set", "ledger.type=embedded"}},
		{"2 replicas, both", "replicaCount 2", []string{"--set", "replicaCount=2", "--set", "keys.source=file", "--set", "ledger.type=embedded"}},
		{"no TLS without insecure", "tls.secretName is empty", []string{"--set", "tls.secretName="}},
		{"an unknown key source (values.schema.json)", "keys/source", []string{"--set", "keys.source=nope"}},
	}
	for _, r := range refusals {
		args := append([]string{"template", "sealer", chartDir, "--kube-version", kubeVersion}, r.values...)
		_, err := helmRun(helm, args...)
		if err == nil || !strings.Contains(err.Error(), r.want) {
			t.Errorf("%s: helm template error %v, want one naming %q", r.name, err, r.want)
			continue
		}
		t.Logf("refused: %s: %s", r.name, firstLine(err.Error()))
	}
}

// checkDeployment checks what the Kubernetes schema cannot: the restricted
// security context, the probes and the termination grace.
func checkDeployment(t *testing.T, name string, manifest []byte) {
	t.Helper()
	dec := yaml.NewDecoder(bytes.NewReader(manifest))
	for {
		var d struct {
			Kind string
			Spec struct {
				Template struct {
					Spec struct {
						TerminationGracePeriodSeconds int `yaml:"terminationGracePeriodSeconds"`
						SecurityContext               struct {
							RunAsNonRoot   bool                  `yaml:"runAsNonRoot"`
							SeccompProfile struct{ Type string } `yaml:"seccompProfile"`
						} `yaml:"securityContext"`
						Containers []struct {
							Args            []string
							SecurityContext struct {
								RunAsNonRoot             bool  `yaml:"runAsNonRoot"`
								ReadOnlyRootFilesystem   bool  `yaml:"readOnlyRootFilesystem"`
								AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
								Capabilities             struct{ Drop []string }
							} `yaml:"securityContext"`
							ReadinessProbe struct {
								HTTPGet struct{ Path string } `yaml:"httpGet"`
							} `yaml:"readinessProbe"`
							LivenessProbe struct {
								HTTPGet struct{ Path string } `yaml:"httpGet"`
							} `yaml:"livenessProbe"`
						}
					}
				}
			}
		}
		if err := dec.Decode(&d); err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatal(err)
			}
			t.Errorf("%s: no Deployment", name)
			return
		}
		if d.Kind != "Deployment" {
			continue
		}
		ps := d.Spec.Template.Spec
		if len(ps.Containers) != 1 {
			t.Fatalf("%s: %d containers", name, len(ps.Containers))
		}
		c := ps.Containers[0]
		sc := c.SecurityContext
		if !ps.SecurityContext.RunAsNonRoot || ps.SecurityContext.SeccompProfile.Type != "RuntimeDefault" || !sc.RunAsNonRoot ||
			!sc.ReadOnlyRootFilesystem || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || strings.Join(sc.Capabilities.Drop, ",") != "ALL" {
			t.Errorf("%s: security context is not restricted: pod %+v, container %+v", name, ps.SecurityContext, sc)
		}
		if c.ReadinessProbe.HTTPGet.Path != "/readyz" || c.LivenessProbe.HTTPGet.Path != "/livez" {
			t.Errorf("%s: probes readiness %q liveness %q", name, c.ReadinessProbe.HTTPGet.Path, c.LivenessProbe.HTTPGet.Path)
		}
		// Every flag the chart passes is one the sealer knows.
		help, _ := exec.Command(binary, "serve", "--help").CombinedOutput()
		for _, a := range c.Args[1:] {
			flag, _, _ := strings.Cut(a, "=")
			if !strings.HasPrefix(flag, "--") || !strings.Contains(string(help), "\n  "+flag+" ") && !strings.Contains(string(help), "\n  "+flag+"\n") {
				t.Errorf("%s: the Deployment passes %q, which `sealer serve --help` does not list", name, a)
			}
		}
		delay, grace := flagSeconds(t, c.Args, "--shutdown-delay="), flagSeconds(t, c.Args, "--shutdown-grace=")
		if ps.TerminationGracePeriodSeconds <= delay+grace {
			t.Errorf("%s: terminationGracePeriodSeconds %d, not above shutdown delay %ds + grace %ds", name, ps.TerminationGracePeriodSeconds, delay, grace)
		}
		return
	}
}

func flagSeconds(t *testing.T, args []string, prefix string) int {
	t.Helper()
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, prefix); ok {
			d, err := parseDuration(v)
			if err != nil {
				t.Fatalf("%s: %v", a, err)
			}
			return d
		}
	}
	t.Fatalf("no %s in %v", prefix, args)
	return 0
}

func parseDuration(s string) (int, error) {
	d, err := time.ParseDuration(s)
	return int(d.Seconds()), err
}

func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}

func firstLine(s string) string {
	s = strings.TrimPrefix(s, "exit status 1: ")
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return line
}
