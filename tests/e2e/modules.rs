//! `radwasm dev` on templates with Bicep modules: the Radius simulator
//! evaluates the nested deployments, and the controller brings every
//! template to Ready with one DeploymentResource per resource the modules
//! deploy (none for the nested deployments themselves).

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A module inside a module, whose `existing` application is the one the
/// outer template deploys first.
const NESTED: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../sim/radius/tests/fixtures/modules/module-nested.json"
));

/// A `copy` loop over a module, with an output loop over its instances.
const LOOP: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../sim/radius/tests/fixtures/modules/module-loop.json"
));

const SCOPE: &str = "/planes/radius/local/resourceGroups/default";

/// A DeploymentTemplate manifest carrying `template` as JSON text.
fn manifest(name: &str, template: &str) -> String {
    let indented: String = template
        .lines()
        .map(|line| format!("    {line}\n"))
        .collect();
    format!(
        "apiVersion: radapp.io/v1alpha3\n\
         kind: DeploymentTemplate\n\
         metadata:\n  name: {name}\n  namespace: default\n\
         spec:\n  template: |\n{indented}\
         \x20 providerConfig:\n    radius:\n      type: Radius\n      value:\n        scope: {SCOPE}\n"
    )
}

#[test]
fn dev_brings_templates_with_modules_to_ready() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("modules.yaml");
    let text = format!(
        "{}---\n{}",
        manifest("nested-modules", NESTED),
        manifest("module-loop", LOOP)
    );
    std::fs::write(&path, text).expect("write manifest");
    let mut child = Command::new(env!("CARGO_BIN_EXE_radwasm"))
        .arg("dev")
        .arg("--kubeconfig")
        .arg(dir.path().join("dev.kubeconfig"))
        .arg(&path)
        .current_dir(dir.path())
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start radwasm dev");
    let mut stdout = child.stdout.take().expect("stdout");
    let reader = std::thread::spawn(move || {
        let mut output = String::new();
        std::io::Read::read_to_string(&mut stdout, &mut output).expect("read stdout");
        output
    });
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for radwasm dev") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "radwasm dev did not exit within 120 s\n{}",
                reader.join().unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let output = reader.join().expect("stdout reader");
    assert!(status.success(), "{status:?}\n{output}");
    assert!(output.contains("all 2 templates Ready"), "{output}");

    // One DeploymentResource per resource the modules and the templates
    // deploy; the `existing` application of the nested module is counted
    // once, the nested deployments not at all.
    let expected = [
        "Applications.Core/environments/nested-env",
        "Applications.Core/applications/nested-app",
        "Applications.Datastores/redisCaches/cache",
        "Applications.Datastores/sqlDatabases/nested-app-db",
        "Applications.Core/environments/loop-env",
        "Applications.Core/applications/loop-app",
        "Applications.Core/containers/resize",
        "Applications.Core/containers/thumbnail",
    ];
    let created: Vec<&str> = output
        .lines()
        .filter(|line| line.contains("+ DeploymentResource default/"))
        .filter_map(|line| line.split(" -> ").nth(1))
        .collect();
    assert_eq!(created.len(), expected.len(), "{output}");
    for rest in expected {
        let id = format!("{SCOPE}/providers/{rest}");
        assert!(created.contains(&id.as_str()), "{id} missing\n{output}");
    }
    assert!(
        !output.contains("Microsoft.Resources/deployments/data"),
        "{output}"
    );
    for name in ["default/nested-modules", "default/module-loop"] {
        let row = output
            .lines()
            .find(|line| line.starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("no summary row for {name}\n{output}"));
        assert!(row.contains("Ready") && row.contains(" 4 "), "{row}");
    }
}
