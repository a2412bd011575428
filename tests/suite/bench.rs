//! The backend benchmark: its sweeps, its report schema (shared with
//! `pytorch/pytorch_reference.py`), the merge and tables, a real epoch, and the example end to
//! end on ndarray (all cores and the single-thread child process).

use std::path::Path;
use std::process::Command;

use burn::backend::{Autodiff, NdArray};
use cubenet::bench::{
    BenchModel, BenchPlan, BlockShape, PHASES, Point, Protocol, Report, ReportError,
    SpeedrunConfig, Sweep, Variant, compare_blocks, speedrun_on, time_epoch, time_phases,
};
use cubenet::data::{MnistSource, MnistSplit};
use cubenet::device::BackendKind;
use cubenet::model::{ImageModelConfig, Kernels, SimpleCnnConfig};

use crate::common::mnist_source;

/// A report exactly as `pytorch_reference.py` writes it (its schema is the contract).
const PYTORCH_JSON: &str = r#"{
  "sources": [{"tool": "pytorch/pytorch_reference.py", "device": "NVIDIA H100 80GB HBM3",
               "software": "torch 2.11.0, CUDA 12.8, cuDNN 91000",
               "command": "python3 pytorch/pytorch_reference.py", "date": "2026-11-21T10:00:00Z"}],
  "steps": [
    {"model": "simple", "variant": "pytorch-eager", "batch": 1000, "filters": 256, "warmup": 10,
     "timing": {"median_ms": 5.0, "min_ms": 4.9, "max_ms": 6.0, "runs": 30}},
    {"model": "lenet", "variant": "pytorch-compile", "batch": 100, "filters": null, "warmup": 10,
     "timing": {"median_ms": 1.5, "min_ms": 1.4, "max_ms": 1.9, "runs": 30}}
  ],
  "phases": [],
  "epochs": [
    {"model": "simple", "variant": "pytorch-eager", "batch": 1000, "filters": 256,
     "images": 60000, "seconds": 0.41, "test_accuracy": 0.975}
  ]
}"#;

fn point(model: BenchModel, batch: usize, filters: Option<usize>) -> Point {
    Point {
        model,
        batch,
        filters,
    }
}

#[test]
fn default_sweep_is_the_batch_and_filter_sweeps_and_cpu_caps_apply_to_cpu_variants_only() {
    let sweep = Sweep::default();
    let points = sweep.points();
    let simple: Vec<_> = points
        .iter()
        .filter(|p| p.model == BenchModel::Simple)
        .map(|p| (p.filters.unwrap(), p.batch))
        .collect();
    // batch ∈ {100, 250, 500, 1000} at d = 256 and d ∈ {32, 64, 128, 256} at batch 1000, the
    // shared point once.
    let mut expected = vec![(256, 100), (256, 250), (256, 500), (256, 1000)];
    expected.extend([(32, 1000), (64, 1000), (128, 1000)]);
    expected.sort();
    let mut simple_sorted = simple.clone();
    simple_sorted.sort();
    assert_eq!(simple_sorted, expected);
    for model in [BenchModel::Lenet, BenchModel::Mlp] {
        let batches: Vec<_> = points
            .iter()
            .filter(|p| p.model == model)
            .map(|p| (p.batch, p.filters))
            .collect();
        assert_eq!(
            batches,
            [(100, None), (250, None), (500, None), (1000, None)]
        );
    }
    let plan = BenchPlan {
        sweep,
        gpu: Protocol {
            warmup: 10,
            repeats: 30,
        },
        cpu: Protocol {
            warmup: 1,
            repeats: 3,
        },
        cpu_max_batch: Some(250),
        cpu_max_filters: Some(128),
        phase_filters: vec![32],
    };
    assert_eq!(plan.points(Variant::CudaCubenet).len(), 15);
    let cpu = plan.points(Variant::NdarraySingleThread);
    assert!(cpu.iter().all(|p| p.batch <= 250), "{cpu:?}");
    // simple (256, ≤250) is capped by filters; lenet and mlp keep 100 and 250.
    assert_eq!(cpu.len(), 4, "{cpu:?}");
    assert_eq!(plan.protocol(Variant::Ndarray).repeats, 3);
    assert_eq!(plan.protocol(Variant::WgpuCubenet).repeats, 30);
    assert!(plan.phase_points(Variant::Ndarray).is_empty());
    assert_eq!(
        plan.phase_points(Variant::CudaBurn),
        [point(BenchModel::Simple, 1000, Some(32))]
    );
}

#[test]
fn pytorch_report_merges_into_tables_with_speedups() {
    let pytorch: Report = serde_json::from_str(PYTORCH_JSON).expect("the PyTorch schema parses");
    let ours: Report = serde_json::from_str(
        r#"{"sources": [], "steps": [
            {"model": "simple", "variant": "cuda-cubenet", "batch": 1000, "filters": 256,
             "warmup": 10, "timing": {"median_ms": 2.0, "min_ms": 1.9, "max_ms": 2.2, "runs": 30}},
            {"model": "simple", "variant": "cuda-burn", "batch": 1000, "filters": 256,
             "warmup": 10, "timing": {"median_ms": 50.0, "min_ms": 49.0, "max_ms": 52.0, "runs": 30}},
            {"model": "simple", "variant": "ndarray", "batch": 1000, "filters": 256,
             "warmup": 1, "timing": {"median_ms": 900.0, "min_ms": 880.0, "max_ms": 950.0, "runs": 3}}
        ]}"#,
    )
    .unwrap();
    let mut report = ours;
    report.merge(pytorch.clone());
    assert!(report.duplicate_steps().is_empty());
    assert_eq!(report.sources.len(), 1);
    assert_eq!(report.steps.len(), 5);
    assert_eq!(
        report.variants(),
        [
            Variant::Ndarray,
            Variant::CudaBurn,
            Variant::CudaCubenet,
            Variant::PytorchEager,
            Variant::PytorchCompile
        ]
    );
    let md = report.markdown();
    assert!(
        md.contains("| d | batch | ndarray | cuda-burn | cuda-cubenet | pytorch-eager |\n"),
        "{md}"
    );
    assert!(
        md.contains("| 256 | 1000 | 900.000† | 50.000 | 2.000 | 5.000 |\n"),
        "{md}"
    );
    // cubenet's speedups against the baselines measured at its points: 900/2, 5/2, 50/2;
    // the run of 3 steps is flagged.
    assert!(
        md.contains("| d | batch | vs ndarray | vs pytorch-eager | vs cuda-burn |\n"),
        "{md}"
    );
    assert!(
        md.contains("| 256 | 1000 | 450.00× | 2.50× | 25.00× |\n"),
        "{md}"
    );
    assert!(md.contains("† fewer than 20 timed steps"), "{md}");
    assert!(
        md.contains("| d | batch | pytorch-compile |\n|---|---|---|\n| – | 100 | 1.500 |"),
        "{md}"
    );
    assert!(
        md.contains("| simple | 256 | 1000 | pytorch-eager | 60000 | 0.410 | 97.50% |"),
        "{md}"
    );
    // Seconds per epoch at 2 ms per step of 1000 images: 60 steps.
    let step = report
        .step(
            Variant::CudaCubenet,
            point(BenchModel::Simple, 1000, Some(256)),
        )
        .unwrap();
    assert!((step.epoch_seconds() - 0.12).abs() < 1e-12);
    // A report merged twice is caught.
    report.merge(pytorch);
    assert_eq!(report.duplicate_steps().len(), 2);
}

/// Tables print the names the command line and the JSON use.
#[test]
fn variant_and_model_names_agree_across_cli_json_and_tables() {
    for variant in Variant::ALL {
        let json = serde_json::to_string(&variant).unwrap();
        assert_eq!(json, format!("\"{variant}\""));
        let parsed = <Variant as clap::ValueEnum>::from_str(&variant.to_string(), false);
        assert_eq!(parsed, Ok(variant));
    }
    for model in [BenchModel::Simple, BenchModel::Lenet, BenchModel::Mlp] {
        assert_eq!(
            serde_json::to_string(&model).unwrap(),
            format!("\"{model}\"")
        );
    }
}

/// Every variant label that pytorch/pytorch_reference.py writes is one the merge reads.
#[test]
fn pytorch_reference_variants_are_known_to_the_merge() {
    let script = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/pytorch/pytorch_reference.py"
    ))
    .unwrap();
    let labels: Vec<&str> = script
        .split('"')
        .filter(|quoted| quoted.starts_with("pytorch-"))
        .collect();
    assert!(labels.contains(&"pytorch-compile-bf16"), "{labels:?}");
    for label in labels {
        let parsed: Result<Variant, _> = serde_json::from_str(&format!("\"{label}\""));
        assert!(parsed.is_ok(), "{label} is not a variant of the merge");
    }
}

#[test]
fn reports_round_trip_and_schema_errors_name_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let report: Report = serde_json::from_str(PYTORCH_JSON).unwrap();
    let path = dir.path().join("r.json");
    report.write_json(&path).unwrap();
    assert_eq!(Report::read(&path).unwrap(), report);

    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, PYTORCH_JSON.replace("\"median_ms\"", "\"mean_ms\"")).unwrap();
    let error = Report::read(&bad).unwrap_err();
    assert!(matches!(error, ReportError::Schema { .. }), "{error}");
    let text = error.to_string();
    assert!(
        text.contains("bad.json") && text.contains("mean_ms"),
        "{text}"
    );

    let unknown_variant = dir.path().join("variant.json");
    std::fs::write(
        &unknown_variant,
        PYTORCH_JSON.replace("pytorch-eager", "jax"),
    )
    .unwrap();
    assert!(
        Report::read(&unknown_variant)
            .unwrap_err()
            .to_string()
            .contains("jax")
    );

    let missing = Report::read(&dir.path().join("none.json")).unwrap_err();
    assert!(matches!(missing, ReportError::Io { .. }), "{missing}");
}

#[test]
fn real_epoch_trains_on_device_resident_mnist() {
    let source = mnist_source();
    let subset = |split, n| source.subset(split).unwrap().limit(Some(n));
    let train = subset(MnistSplit::Train, 3000);
    let test = subset(MnistSplit::Test, 500);
    let device = Default::default();
    let result = time_epoch::<Autodiff<NdArray>>(
        &device,
        point(BenchModel::Mlp, 100, None),
        Variant::NdarrayBurn.burn_setup().unwrap(),
        1,
        &train,
        &test,
    );
    assert_eq!(result.images, 3000);
    // 30 SGD steps of the MLP: far above chance (10%).
    assert!(result.test_accuracy > 0.6, "{result:?}");
}

#[test]
fn speedrun_trains_each_seed_and_marks_every_epoch() {
    let source = mnist_source();
    let train = source.subset(MnistSplit::Train).unwrap().limit(Some(2000));
    let test = source.subset(MnistSplit::Test).unwrap().limit(Some(500));
    let config = SpeedrunConfig::new(ImageModelConfig::Simple(
        SimpleCnnConfig::new().with_filters(8),
    ))
    .with_batch_size(100)
    .with_epochs(2)
    .with_lr(0.05)
    .with_warmup(0.2);
    let mut reported = Vec::new();
    let runs = speedrun_on(
        BackendKind::Ndarray,
        &config,
        &train,
        &test,
        3..5,
        &mut |run| reported.push(run.seed),
    )
    .unwrap();
    assert_eq!(reported, [3, 4]);
    assert_eq!(runs.len(), 2);
    for run in &runs {
        let epochs: Vec<usize> = run.marks.iter().map(|m| m.epoch).collect();
        assert_eq!(epochs, [1, 2], "{run:?}");
        let [first, last] = [run.marks[0], run.last()];
        assert!(0.0 < first.train_seconds && first.train_seconds < last.train_seconds);
        // 40 steps of the 8-filter CNN: far above chance (10%).
        assert!(last.test_accuracy > 0.7, "{run:?}");
        assert_eq!(run.time_to(0.0), Some(first.train_seconds));
        assert_eq!(run.time_to(1.01), None);
    }
}

#[test]
fn phase_breakdown_times_every_phase() {
    let device = Default::default();
    let protocol = Protocol {
        warmup: 1,
        repeats: 3,
    };
    let timings = time_phases::<Autodiff<NdArray>>(&device, 2, 4, Kernels::Burn, protocol);
    assert_eq!(timings.len(), PHASES.len());
    for t in timings {
        assert_eq!(t.runs, 3);
        assert!(t.min_ms <= t.median_ms && t.median_ms <= t.max_ms, "{t:?}");
    }
}

#[test]
fn cifar_blocks_chain_to_the_dense_layer_and_time_both_ways() {
    let blocks = BenchModel::cifar_blocks();
    let inputs: Vec<[usize; 3]> = blocks.iter().map(|b| b.input).collect();
    assert_eq!(inputs, [[3, 32, 32], [64, 16, 16], [128, 8, 8]]);
    // The last block's pooled map is what the dense layer flattens.
    assert_eq!(blocks[2].output(), [256, 4, 4]);
    // An odd map with no padding: the pool drops the last row and column.
    let odd = BlockShape {
        input: [2, 9, 9],
        filters: 3,
        kernel: 3,
        padding: 0,
    };
    assert_eq!(odd.output(), [3, 3, 3]);

    let protocol = Protocol {
        warmup: 1,
        repeats: 3,
    };
    let small = [
        odd,
        BlockShape {
            input: [3, 6, 6],
            ..odd
        },
    ];
    let ops = compare_blocks::<NdArray>(&Default::default(), 2, &small, protocol);
    assert_eq!(ops.len(), 2);
    assert!(
        ops[0].op.starts_with("block 1: conv 3x3 2→3 on 9x9"),
        "{}",
        ops[0].op
    );
    for op in ops {
        for t in [op.custom, op.burn] {
            assert_eq!(t.runs, 3);
            assert!(t.min_ms <= t.median_ms && t.median_ms <= t.max_ms, "{t:?}");
        }
    }
}

/// The committed tables in docs/benchmarks/ are its H100 reports merged (the commands in
/// docs/BENCHMARKS.md): the reports parse (PyTorch's as its script wrote them) and the tables
/// match them.
#[test]
fn committed_benchmark_tables_match_their_reports() {
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/benchmarks");
    for (reports, tables) in [("h100", "results.md"), ("h100-same-call", "same-call.md")] {
        let mut files: Vec<_> = std::fs::read_dir(docs.join(reports))
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
            .collect();
        files.sort();
        let mut report = Report::default();
        for file in &files {
            report.merge(Report::read(file).unwrap());
        }
        assert!(report.duplicate_steps().is_empty(), "{reports}");
        assert!(
            report.variants().contains(&Variant::PytorchEager),
            "{reports}"
        );
        let committed = std::fs::read_to_string(docs.join(tables)).unwrap();
        assert_eq!(report.markdown(), committed, "{reports} vs {tables}");
    }
}

fn run_bench(args: &[&str], out: &Path) -> std::process::Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_cubenet"));
    command.arg("bench").args(args).arg("--out").arg(out);
    command.output().expect("cubenet runs")
}

/// The tiny ndarray sweep CI runs: cubenet's CPU kernels on all cores and on one thread (in
/// the single-thread child process) and Burn's ops beside them, the real epoch, every output
/// file, then a merge of PyTorch's report.
#[test]
fn bench_runs_a_tiny_cpu_sweep_end_to_end() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let mut args = vec![
        "--variants",
        "ndarray,ndarray-burn,ndarray-1thread",
        "--models",
        "simple,mlp",
        "--batches",
        "8,16",
        "--filters",
        "2,4",
        "--sweep-filters-at-batch",
        "16",
        "--sweep-batches-at-filters",
        "4",
        "--cpu-warmup",
        "1",
        "--cpu-repeats",
        "3",
        "--epoch-model",
        "mlp",
        "--epoch-batch",
        "250",
        "--epoch-limit",
        "1000",
        "--cpu-epoch",
    ];
    let data_dir;
    if let MnistSource::Dir(dir) = mnist_source() {
        data_dir = dir.display().to_string();
        args.extend(["--data-dir", &data_dir]);
    }
    let output = run_bench(&args, &out);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");

    let report = Report::read(&out.join("results.json")).unwrap();
    assert_eq!(report.sources.len(), 1);
    assert!(
        report.sources[0]
            .command
            .contains("--variants ndarray,ndarray-burn,ndarray-1thread")
    );
    // simple: (4, 8), (4, 16), (2, 16); mlp: 8, 16 — per variant.
    assert_eq!(report.steps.len(), 3 * 5, "{:?}", report.steps);
    for step in &report.steps {
        let t = step.timing;
        assert_eq!(t.runs, 3);
        assert!(
            0.0 < t.min_ms && t.min_ms <= t.median_ms && t.median_ms <= t.max_ms,
            "{t:?}"
        );
    }
    assert_eq!(
        report.variants(),
        [
            Variant::Ndarray,
            Variant::NdarrayBurn,
            Variant::NdarraySingleThread
        ]
    );
    assert!(report.phases.is_empty(), "no phase breakdown on the CPU");
    if args.contains(&"--data-dir") {
        assert_eq!(report.epochs.len(), 3);
        assert!(report.epochs.iter().all(|e| e.images == 1000));
    }
    let csv = std::fs::read_to_string(out.join("results.csv")).unwrap();
    let mut lines = csv.lines();
    assert_eq!(
        lines.next(),
        Some("model,variant,batch,filters,warmup,runs,median_ms,min_ms,max_ms,epoch_s")
    );
    assert_eq!(lines.count(), 15);
    let md = std::fs::read_to_string(out.join("results.md")).unwrap();
    assert!(
        md.contains("### simple: milliseconds per training step"),
        "{md}"
    );
    // cubenet's CPU kernels against Burn's ops on the same cores; the single-thread run has
    // no single-thread baseline here, so no speedup table.
    assert!(
        md.contains("### simple: speedup of ndarray (baseline time / ndarray time)"),
        "{md}"
    );
    assert!(!md.contains("speedup of ndarray-1thread"), "{md}");
    for png in ["simple.png", "mlp.png"] {
        let bytes = std::fs::read(out.join(png)).unwrap();
        assert_eq!(&bytes[..4], b"\x89PNG", "{png}");
    }

    // Merge-only: PyTorch's columns join the same tables.
    let pytorch = dir.path().join("pytorch.json");
    std::fs::write(&pytorch, PYTORCH_JSON).unwrap();
    let merged_dir = dir.path().join("merged");
    let results = out.join("results.json");
    let merge_args = [
        "--merge-only",
        "--merge",
        results.to_str().unwrap(),
        "--merge",
        pytorch.to_str().unwrap(),
    ];
    let output = run_bench(&merge_args, &merged_dir);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let merged = Report::read(&merged_dir.join("results.json")).unwrap();
    assert_eq!(merged.sources.len(), 2);
    assert_eq!(merged.steps.len(), 17);
    assert!(String::from_utf8_lossy(&output.stdout).contains("pytorch-eager"));
}

/// `--devices` times burn-train's data-parallel training on the first device, then on all;
/// on ndarray both indices are the same CPU, as in `data_parallel.rs`.
#[test]
fn bench_times_data_parallel_training_on_one_and_on_all_devices() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let args = [
        "--variants",
        "ndarray,ndarray-1thread",
        "--models",
        "lenet",
        "--batches",
        "8",
        "--devices",
        "0,1",
        "--scaling-steps",
        "3",
    ];
    let output = run_bench(&args, &out);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report = Report::read(&out.join("results.json")).unwrap();
    assert!(report.steps.is_empty(), "--devices replaces the step sweep");
    let runs: Vec<(Variant, BenchModel, usize, Vec<usize>)> = report
        .scaling
        .iter()
        .map(|s| (s.variant, s.model, s.batch, s.devices.clone()))
        .collect();
    // The single-thread variant is left out: one thread is not shared between devices.
    assert_eq!(
        runs,
        [
            (Variant::Ndarray, BenchModel::Lenet, 8, vec![0]),
            (Variant::Ndarray, BenchModel::Lenet, 8, vec![0, 1]),
        ]
    );
    assert!(report.scaling.iter().all(|s| s.images_per_second > 0.0));
    let md = std::fs::read_to_string(out.join("results.md")).unwrap();
    assert!(md.contains("### Data-parallel training"), "{md}");
    assert!(md.contains("| lenet | – | 8 | ndarray | [0, 1] |"), "{md}");
    assert!(md.contains("| lenet | – | 8 | ndarray | [0] |"), "{md}");
}

#[test]
fn bench_user_errors_are_one_line_and_exit_code_2() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&[&str], &str); 3] = [
        (
            &["--variants", "pytorch-eager"],
            "pytorch/pytorch_reference.py",
        ),
        (
            &["--variants", "ndarray", "--data-dir", "/nonexistent/mnist"],
            "/nonexistent/mnist",
        ),
        (
            &["--merge-only", "--merge", "/nonexistent/pytorch.json"],
            "/nonexistent/pytorch.json",
        ),
    ];
    for (args, named) in cases {
        let output = run_bench(args, dir.path());
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
        assert!(
            stderr.starts_with("error: ") && stderr.contains(named),
            "{stderr}"
        );
    }
}
