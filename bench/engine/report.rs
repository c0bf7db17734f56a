//! Report helpers shared by the measurements' Markdown sections.

pub fn kb_to_mib(kb: i64) -> f64 {
    kb as f64 / 1024.0
}

pub fn print_profile(title: &str, groups: &[(String, u64, u64)], per: usize) {
    println!("\n{title}\n");
    println!("| command (SLOWLOG) | calls | calls/task | Redis µs/call | Redis µs/task |");
    println!("|---|---:|---:|---:|---:|");
    for (label, calls, us) in groups {
        println!(
            "| `{label}` | {calls} | {:.3} | {:.1} | {:.2} |",
            *calls as f64 / per as f64,
            *us as f64 / (*calls).max(1) as f64,
            *us as f64 / per as f64
        );
    }
}
