// Validates prometheus-operator objects (ServiceMonitor, PrometheusRule) against the CRD schemas
// shipped in @kubernetes-models/prometheus-operator, which kubernetes-validate lacks.
// Usage: node validate_crds.mjs NODE_MODULES_DIR < objects.json   (a JSON array of objects)
// Prints one line per object; exits 1 when any object is invalid, 2 on a usage error.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const modules = process.argv[2];
if (!modules) {
  console.error("usage: node validate_crds.mjs NODE_MODULES_DIR < objects.json");
  process.exit(2);
}
const objects = JSON.parse(readFileSync(0, "utf8"));
let failed = 0;
for (const object of objects) {
  const [group, version] = object.apiVersion.split("/");
  const file = join(modules, "@kubernetes-models", "prometheus-operator", group, version, `${object.kind}.js`);
  let model;
  try {
    model = (await import(pathToFileURL(file).href))[object.kind];
  } catch (error) {
    console.log(`ERROR ${object.kind}/${object.metadata.name}: no schema for ${object.apiVersion} ${object.kind}: ${error.message}`);
    failed += 1;
    continue;
  }
  try {
    new model(object).validate();
    console.log(`OK ${object.kind}/${object.metadata.name}`);
  } catch (error) {
    console.log(`ERROR ${object.kind}/${object.metadata.name}: ${error.message}`);
    failed += 1;
  }
}
process.exit(failed ? 1 : 0);
