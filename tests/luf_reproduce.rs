//! `mmsim reproduce luf` (seed 000, issue 12 item 3) at 1/1024 scale with 3 generated tokens:
//! the JSON's shape, determinism (the parallel run equals the sequential one, byte for byte
//! once the host's wall-clock fields are left out).

use mmsim::reproduce::luf;

const SCALE: u64 = 1024;

fn sets() -> Vec<String> {
    vec!["workload.llm.gen_tokens=3".to_string()]
}

/// The JSON of a run without the host-side fields (wall time and what is derived from it).
fn without_host(mut v: serde_json::Value) -> serde_json::Value {
    for r in v["runs"].as_array_mut().expect("runs") {
        let r = r.as_object_mut().expect("a run");
        r.remove("wall_s");
        r.remove("accesses_per_wall_s");
    }
    v
}

#[test]
fn luf_reproduction_shape_and_determinism() {
    let (out, text) = luf::experiment(SCALE, &sets()).expect("runs");
    let v = serde_json::to_value(&out).unwrap();
    assert_eq!(v["experiment"], "luf");
    assert_eq!(v["scale"], SCALE);
    let rows = v["rows"].as_array().expect("rows");
    let metrics: Vec<&str> = rows.iter().map(|r| r["metric"].as_str().unwrap()).collect();
    assert_eq!(metrics, ["tlb_flush_events", "tlb_shootdown_irqs", "itlb_load_misses", "dtlb_store_misses", "dtlb_load_misses", "runtime_s", "luf_alloc_flush_s", "pages_demoted", "pages_promoted"]);
    for r in rows {
        for k in ["before", "after", "after_v12"] {
            let x = r["simulated"][k].as_f64().unwrap_or_else(|| panic!("{}: simulated.{k} is a number", r["metric"]));
            assert!(x.is_finite() && x >= 0.0, "{}: simulated.{k} = {x}", r["metric"]);
        }
        let m = r["metric"].as_str().unwrap();
        let published = &r["published"];
        if m.starts_with("luf_") || m.starts_with("pages_") {
            assert!(published.is_null(), "{m}: the seed gives no figure");
        } else {
            assert!(published["before"].as_f64().unwrap() > published["after"].as_f64().unwrap(), "{m}: the seed's figures fall");
            // v12's published figures exist for the two rows the v12 cover letter gives.
            assert_eq!(published["after_v12"].is_number(), m == "tlb_shootdown_irqs" || m == "runtime_s", "{m}");
        }
    }
    // The seed's IRQ line, summed from its 64 numbers, and its 30 runtimes' mean.
    assert_eq!(rows[1]["published"]["before"].as_f64().unwrap(), 12_512_508_160.0);
    assert_eq!(rows[1]["published"]["after"].as_f64().unwrap(), 569_270_346.0);
    assert!((rows[5]["published"]["before"].as_f64().unwrap() - 1052.527).abs() < 0.01);
    // The workload ran: reclaim kept unmapping the models (the runs are not trivially empty).
    let before = |m: &str| rows.iter().find(|r| r["metric"] == m).unwrap()["simulated"]["before"].as_f64().unwrap();
    assert!(before("tlb_shootdown_irqs") > 0.0 && before("pages_demoted") > 0.0 && before("runtime_s") > 0.0);
    assert_eq!(v["runs"].as_array().unwrap().len(), 3);
    assert!(text.contains("tlb_shootdown_irqs"), "{text}");

    // Determinism: the same experiment on a one-thread pool (the sequential run).
    let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
    let (seq, _) = pool.install(|| luf::experiment(SCALE, &sets()).expect("runs"));
    let seq = serde_json::to_value(&seq).unwrap();
    assert_eq!(serde_json::to_string(&without_host(seq)).unwrap(), serde_json::to_string(&without_host(v)).unwrap());
}
