use std::path::PathBuf;

use super::sdk::{WORKSPACE_MANIFEST, section_entries};
use super::*;

#[test]
fn kebab_case_crate_names_are_accepted() {
    for name in [
        "my-policy",
        "team-label-guardrail",
        "p",
        "guard2",
        "snake_case_too",
    ] {
        validate_name(name).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}

#[test]
fn names_that_are_not_crate_names_are_refused_with_the_reason() {
    for (name, reason) in [
        ("", "empty"),
        ("My-Policy", "'M' is not allowed"),
        ("my policy", "' ' is not allowed"),
        ("../escape", "'.' is not allowed"),
        ("2fast", "start with a letter"),
        ("-x", "start with a letter"),
        ("trailing-", "end with a letter"),
        ("double--dash", "separators"),
        ("fn", "keyword"),
        ("async", "keyword"),
        ("self", "keyword"),
        ("std", "taken"),
        ("radwasm-policy-sdk", "taken"),
        ("con", "taken"),
        (&"x".repeat(65), "longer than 64"),
    ] {
        let error = validate_name(name).expect_err(name).to_string();
        assert!(error.contains(reason), "{name}: {error}");
    }
}

#[test]
fn wrap_fills_paragraphs_without_splitting_words() {
    assert_eq!(
        wrap("aa bb  cc\ndd eeeeeeee\n\nff", 8),
        "aa bb cc\ndd\neeeeeeee\n\nff"
    );
}

#[test]
fn the_policy_type_is_the_name_in_camel_case_and_never_shadows_an_import() {
    assert_eq!(type_name("team-label-guardrail"), "TeamLabelGuardrail");
    assert_eq!(type_name("a_b2-c"), "AB2C");
    assert_eq!(type_name("layer"), "LayerRules");
    assert_eq!(type_name("policy-error"), "PolicyErrorRules");
}

#[test]
fn the_release_profile_is_the_guest_profile_with_inheritance_resolved() {
    let profile = release_profile();
    let guest = section_entries(WORKSPACE_MANIFEST, "profile.guest");
    assert!(
        !guest.is_empty(),
        "the root Cargo.toml has no [profile.guest]"
    );
    for (key, value) in guest {
        if key != "inherits" {
            assert!(
                profile
                    .lines()
                    .any(|line| line == format!("{key} = {value}")),
                "{key} = {value} missing from\n{profile}"
            );
        }
    }
    assert!(!profile.contains("inherits"), "{profile}");
    // What guests need whatever the root says about release.
    for needed in ["lto = true", "codegen-units = 1", "panic = \"abort\""] {
        assert!(profile.lines().any(|l| l == needed), "{needed}: {profile}");
    }
    let debug: Vec<&str> = profile
        .lines()
        .filter(|l| l.starts_with("debug "))
        .collect();
    assert!(debug.len() <= 1, "{profile}");
}

#[test]
fn the_scaffold_uses_the_rustflags_host_build_rs_builds_guests_with() {
    let build_rs = include_str!("../../build/main.rs");
    let flags = build_rs
        .lines()
        .find_map(|line| line.strip_prefix("const GUEST_RUSTFLAGS: &str = "))
        .expect("GUEST_RUSTFLAGS in host/build/main.rs")
        .trim_end_matches(';')
        .trim_matches('"')
        .split("\\x1f")
        .map(|flag| format!("{flag:?}"))
        .collect::<Vec<_>>()
        .join(", ");
    let config = include_str!("templates/config.toml.tmpl");
    assert!(
        config.contains(&format!("rustflags = [{flags}]")),
        "templates/config.toml.tmpl's rustflags differ from host/build/main.rs's GUEST_RUSTFLAGS ({flags})"
    );
}

#[test]
fn every_placeholder_is_filled_and_paths_are_toml_strings() {
    let sources = [
        SdkSource::Path(PathBuf::from("/checkouts/rad \"wasm\"\\x")),
        SdkSource::Embedded,
        SdkSource::Git {
            url: "https://git.example.com/radwasm.git".into(),
            rev: Some("0123abc".into()),
        },
        SdkSource::Git {
            url: "https://git.example.com/radwasm.git".into(),
            rev: None,
        },
    ];
    for source in &sources {
        let files = render("team-guard", source);
        for file in &files {
            assert!(!file.text.contains("{{"), "{}: {}", file.path, file.text);
        }
        let manifest = &files.iter().find(|f| f.path == "Cargo.toml").unwrap().text;
        assert!(manifest.contains("name = \"team-guard\""), "{manifest}");
        assert!(manifest.contains("crate-type = [\"cdylib\"]"), "{manifest}");
        assert!(manifest.contains("\n[workspace]\n"), "{manifest}");
        let lib = &files.iter().find(|f| f.path == "src/lib.rs").unwrap().text;
        assert!(lib.contains("struct TeamGuard;"), "{lib}");
        assert!(lib.contains("export_layer!(TeamGuard)"), "{lib}");
        let readme = &files.iter().find(|f| f.path == "README.md").unwrap().text;
        assert!(readme.contains("release/team_guard.wasm"), "{readme}");
    }
    let manifest = &render("p", &sources[0])[0].text;
    assert!(
        manifest.contains(
            r#"radwasm-policy-sdk = { path = "/checkouts/rad \"wasm\"\\x/guests/policy-sdk" }"#
        ),
        "{manifest}"
    );
    let manifest = &render("p", &sources[2])[0].text;
    assert!(
        manifest.contains(
            r#"radwasm-policy-core = { git = "https://git.example.com/radwasm.git", rev = "0123abc" }"#
        ),
        "{manifest}"
    );
    assert!(!manifest.contains("exclude"), "{manifest}");
    let manifest = &render("p", &sources[1])[0].text;
    for (name, dir) in SDK_CRATES {
        assert!(
            manifest.contains(&format!("{name} = {{ path = \"sdk/{dir}\" }}")),
            "{manifest}"
        );
    }
    assert!(
        manifest.contains("\n[workspace]\n#") && manifest.contains("\nexclude = [\"sdk\"]\n"),
        "{manifest}"
    );
}

/// The repository's root, where the embedded SDK comes from.
fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("host/ sits inside the repository")
        .to_path_buf()
}

fn embedded(path: &str) -> Option<&'static [u8]> {
    embedded_sdk::SDK_FILES
        .iter()
        .find(|(embedded, _)| *embedded == path)
        .map(|(_, contents)| *contents)
}

/// Every file under `dir` (relative to the repository), but the
/// directories of a crate's own tests, benchmarks and examples.
fn files_on_disk(dir: &str) -> Vec<String> {
    fn walk(root: &Path, relative: &str, found: &mut Vec<String>) {
        for entry in std::fs::read_dir(root.join(relative)).expect("read the directory") {
            let entry = entry.expect("directory entry");
            let name = entry.file_name().to_string_lossy().into_owned();
            let inner = format!("{relative}/{name}");
            if entry.file_type().expect("file type").is_dir() {
                walk(root, &inner, found);
            } else {
                found.push(inner);
            }
        }
    }
    let root = repository();
    let mut found = Vec::new();
    for entry in std::fs::read_dir(root.join(dir)).expect("read the crate") {
        let entry = entry.expect("directory entry");
        let name = entry.file_name().to_string_lossy().into_owned();
        if entry.file_type().expect("file type").is_dir() {
            if !["tests", "benches", "examples", "target"].contains(&name.as_str()) {
                walk(&root, &format!("{dir}/{name}"), &mut found);
            }
        } else {
            found.push(format!("{dir}/{name}"));
        }
    }
    found
}

#[test]
fn the_embedded_sdk_is_every_source_file_of_its_crates_as_in_the_repository() {
    let crate_dirs: Vec<&str> = embedded_sdk::SDK_CRATE_DIRS
        .iter()
        .map(|(_, dir)| *dir)
        .collect();
    for (name, dir) in SDK_CRATES {
        assert!(crate_dirs.contains(&dir), "{name} ({dir}) is not embedded");
    }
    let root = repository();
    for dir in &crate_dirs {
        let files = files_on_disk(dir);
        assert!(
            files.iter().any(|f| f.ends_with("/src/lib.rs")),
            "{dir}: {files:?}"
        );
        for file in files {
            let on_disk = std::fs::read(root.join(&file)).expect("read");
            let contents = embedded(&file)
                .unwrap_or_else(|| panic!("{file} is not embedded: host/build/sdk.rs misses it"));
            assert!(contents == on_disk, "{file}: embedded as it is not on disk");
        }
    }
    // And nothing else: every embedded file but the generated manifest
    // is a file of the repository.
    for (path, contents) in embedded_sdk::SDK_FILES {
        if *path == "Cargo.toml" {
            continue;
        }
        let on_disk = std::fs::read(root.join(path))
            .unwrap_or_else(|e| panic!("{path} is embedded but not in the repository: {e}"));
        assert!(*contents == on_disk, "{path}");
        assert!(
            !path.contains("/tests/") && !path.contains("/target/"),
            "{path} is embedded"
        );
    }
}

#[test]
fn the_embedded_sdk_holds_the_wit_its_bindings_read() {
    // The directory given to `wit_bindgen::generate!`, relative to the
    // SDK crate, must resolve inside the embedded layout to a directory
    // holding every `*.wit` the repository has there.
    let lib = std::str::from_utf8(embedded("guests/policy-sdk/src/lib.rs").expect("lib.rs"))
        .expect("UTF-8");
    let generate = lib
        .split("wit_bindgen::generate!")
        .nth(1)
        .expect("the SDK calls wit_bindgen::generate!");
    let wit_path = generate
        .split_once("path:")
        .and_then(|(_, rest)| rest.split('"').nth(1))
        .expect("generate! names its WIT path");
    let mut parts: Vec<&str> = "guests/policy-sdk".split('/').collect();
    for part in wit_path.split('/') {
        match part {
            ".." => {
                parts.pop().expect("inside the SDK's layout");
            }
            "." | "" => {}
            part => parts.push(part),
        }
    }
    let wit_dir = parts.join("/");
    assert_eq!(wit_dir, "wit", "the SDK binds to another directory");
    let mut wits = 0;
    for entry in std::fs::read_dir(repository().join(&wit_dir)).expect("wit/") {
        let entry = entry.expect("entry");
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with(".wit") {
            let path = format!("{wit_dir}/{name}");
            let contents = embedded(&path).unwrap_or_else(|| panic!("{path} is not embedded"));
            assert!(
                contents == std::fs::read(entry.path()).expect("read"),
                "{path}"
            );
            wits += 1;
        }
    }
    assert!(wits > 0);
}

#[test]
fn the_embedded_sdk_manifest_supplies_everything_its_crates_inherit() {
    let manifest =
        std::str::from_utf8(embedded("Cargo.toml").expect("sdk/Cargo.toml")).expect("UTF-8");
    let package = section_entries(manifest, "workspace.package");
    for key in ["version", "edition", "rust-version"] {
        let root = section_entries(WORKSPACE_MANIFEST, "workspace.package");
        let value = root.iter().find(|(k, _)| *k == key).expect(key).1;
        assert!(package.contains(&(key, value)), "{key}: {manifest}");
    }
    let dependencies = section_entries(manifest, "workspace.dependencies");
    let crate_dirs: Vec<&str> = embedded_sdk::SDK_CRATE_DIRS
        .iter()
        .map(|(_, dir)| *dir)
        .collect();
    for (name, dir) in embedded_sdk::SDK_CRATE_DIRS {
        assert!(
            manifest.contains(&format!("\"{dir}\"")),
            "{dir} is not a member: {manifest}"
        );
        let crate_manifest = std::str::from_utf8(
            embedded(&format!("{dir}/Cargo.toml")).expect("the crate's Cargo.toml"),
        )
        .expect("UTF-8");
        for line in crate_manifest.lines() {
            let Some((key, _)) = line.split_once('=') else {
                continue;
            };
            let key = key.trim();
            let inherited = match key.strip_suffix(".workspace") {
                Some(key) => key,
                None if line.contains("workspace = true") => key,
                None => continue,
            };
            let supplied = package.iter().any(|(k, _)| *k == inherited)
                || dependencies.iter().any(|(k, _)| *k == inherited);
            assert!(
                supplied,
                "{name}: {inherited} is not supplied by\n{manifest}"
            );
        }
    }
    // Path dependencies point at embedded crates only.
    for (name, value) in dependencies {
        if let Some((_, path)) = value.split_once("path = \"") {
            let path = path.split('"').next().expect("quoted");
            assert!(crate_dirs.contains(&path), "{name} = {value}");
        }
    }
    assert!(
        !manifest.contains("[profile"),
        "profiles belong to the policy's manifest"
    );
}

#[test]
fn the_embedded_lock_is_the_repositorys_cut_to_what_the_sdk_reaches() {
    let blocks: Vec<&str> = embedded_sdk::SDK_LOCK
        .split("\n[[package]]\n")
        .skip(1)
        .collect();
    let repository_lock =
        std::fs::read_to_string(repository().join("Cargo.lock")).expect("Cargo.lock");
    let field = |block: &str, key: &str| -> String {
        block
            .lines()
            .find_map(|line| line.strip_prefix(&format!("{key} = ")))
            .unwrap_or_else(|| panic!("no {key} in {block}"))
            .trim_matches('"')
            .to_string()
    };
    let packages: Vec<(String, String)> = blocks
        .iter()
        .map(|block| (field(block, "name"), field(block, "version")))
        .collect();
    for block in &blocks {
        assert!(
            repository_lock.contains(&format!("[[package]]\n{block}")),
            "not the repository's entry: {block}"
        );
        // Every dependency ("name" or "name version") is there too.
        if let Some((_, list)) = block.split_once("dependencies = [\n") {
            for dependency in list.lines().take_while(|line| *line != "]") {
                let dependency = dependency.trim().trim_end_matches(',').trim_matches('"');
                let mut words = dependency.split(' ');
                let name = words.next().expect("a name");
                let version = words.next();
                assert!(
                    packages
                        .iter()
                        .any(|(n, v)| n == name && version.is_none_or(|version| version == v)),
                    "{dependency} is missing from the embedded lock"
                );
            }
        }
    }
    for (name, _) in embedded_sdk::SDK_CRATE_DIRS {
        assert!(packages.iter().any(|(n, _)| n == name), "{name}");
    }
    for host_only in ["radwasm", "wasmtime", "kube"] {
        assert!(
            !packages.iter().any(|(n, _)| n == host_only),
            "{host_only} is in the SDK's lock"
        );
    }
}

#[test]
fn python_and_js_scaffolds_carry_the_current_wit_the_cases_and_their_name() {
    assert_eq!(crate::policy::wit::FILES[0].0, "policy.wit");
    for lang in [Lang::Python, Lang::Js] {
        let files = render_other("team-guard", lang);
        for file in &files {
            assert!(!file.text.contains("{{"), "{}: {}", file.path, file.text);
        }
        let wit = files.iter().find(|f| f.path == "wit/policy.wit").unwrap();
        assert!(wit.text.contains("world layer {"), "{lang:?}");
        assert_eq!(
            files
                .iter()
                .filter(|f| f.path.starts_with("cases/"))
                .count(),
            CASES.len()
        );
        let readme = &files.iter().find(|f| f.path == "README.md").unwrap().text;
        assert!(readme.contains("team-guard.wasm cases/"), "{readme}");
        for step in next_steps("team-guard", lang) {
            if !step.starts_with("npm run") {
                assert!(readme.contains(&step), "{step}: {readme}");
            }
        }
    }
}

#[test]
fn the_toolchain_file_is_the_repositorys() {
    let files = render("p", &SdkSource::Path(PathBuf::from("/x")));
    let toolchain = &files
        .iter()
        .find(|f| f.path == "rust-toolchain.toml")
        .unwrap()
        .text;
    assert!(toolchain.contains("wasm32-wasip2"), "{toolchain}");
    assert!(toolchain.contains("channel = "), "{toolchain}");
}

/// The fenced blocks of `language` in `markdown`'s section `heading`.
fn fenced_blocks(markdown: &str, heading: &str, language: &str) -> Vec<String> {
    let section = markdown
        .split(&format!("\n{heading}\n"))
        .nth(1)
        .unwrap_or_else(|| panic!("no {heading:?}"));
    // Up to the next heading of the same level.
    let level = heading.chars().take_while(|c| *c == '#').count();
    let section = section
        .split(&format!("\n{} ", "#".repeat(level)))
        .next()
        .unwrap_or(section);
    section
        .split(&format!("```{language}\n"))
        .skip(1)
        .map(|block| block.split("```").next().unwrap_or("").to_string())
        .collect()
}

#[test]
fn the_guides_javascript_snippets_are_the_scaffolds_app_js() {
    let guide = include_str!("../../../docs/policy-languages.md");
    let app = include_str!("templates/js/app.js.tmpl");
    let blocks: Vec<String> = fenced_blocks(
        guide,
        "## JavaScript (jco 1.35.0, componentize-qjs 0.4.5)",
        "js",
    )
    .into_iter()
    // The StarlingMonkey build script is not the scaffold's.
    .filter(|block| !block.contains("build.mjs"))
    .collect();
    assert!(blocks.len() >= 3, "{blocks:?}");
    let joined = blocks.concat();
    for needed in [
        r#"import { log } from "radapp:policy/log@0.6.0";"#,
        "action.tag === \"start-deployment\"",
        "action.val.deploymentName",
        "label.key === TEAM",
    ] {
        assert!(joined.contains(needed), "the guide does not show {needed}");
    }
    for block in &blocks {
        assert!(
            app.contains(block.as_str()),
            "this snippet of docs/policy-languages.md is not in the scaffold's app.js \
             (templates/js/app.js.tmpl), which the test suite builds:\n{block}"
        );
    }
}

#[test]
fn every_scaffold_carries_the_sample_templates_with_its_component_path() {
    let rust = render("team-guard", &SdkSource::Path(PathBuf::from("/x")));
    for (files, wasm) in [
        (&rust, "target/wasm32-wasip2/release/team_guard.wasm"),
        (&render_other("team-guard", Lang::Python), "team-guard.wasm"),
        (&render_other("team-guard", Lang::Js), "team-guard.wasm"),
    ] {
        for sample in ["sample/app.yaml", "sample/app-without-team.yaml"] {
            let file = files.iter().find(|f| f.path == sample).expect(sample);
            assert!(!file.text.contains("{{"), "{}", file.text);
            assert!(
                file.text
                    .contains(&format!("radwasm dev --policy {wasm} {sample}")),
                "{}",
                file.text
            );
        }
        let readme = &files.iter().find(|f| f.path == "README.md").unwrap().text;
        assert!(
            readme.contains(&format!("radwasm dev --policy {wasm} sample/app.yaml")),
            "{readme}"
        );
    }
}
