//! Unit tests of `target.rs`: which deployment the options name, and the
//! credentials and TLS each client is built with.

use super::*;

/// Flags and URL forms name the right deployment; TLS, ACL user and
/// password reach every node of a cluster and the Sentinel master.
#[test]
fn topologies_carry_credentials_and_tls() {
    let o = ConnectOptions {
        cluster_nodes: vec!["10.0.0.1:7000".into(), "10.0.0.2:7000".into()],
        username: Some("deck".into()),
        password: Some("pw".into()),
        insecure: true,
        ..ConnectOptions::default()
    };
    assert_eq!(o.topology().unwrap().0, Topology::Cluster);
    let Target::Cluster(c) = o.target().unwrap() else {
        panic!("a cluster")
    };
    assert_eq!(
        c.seeds,
        [
            ("10.0.0.1".to_string(), 7000),
            ("10.0.0.2".to_string(), 7000)
        ]
    );
    let node = c.node_client("10.0.0.3", 7001).unwrap();
    let info = node.get_connection_info();
    assert_eq!(
        (
            info.redis_settings().username(),
            info.redis_settings().password()
        ),
        (Some("deck"), Some("pw"))
    );
    assert!(matches!(
        info.addr(),
        ConnectionAddr::TcpTls {
            insecure: true,
            port: 7001,
            ..
        }
    ));
    assert!(!Target::Cluster(c).is_local());

    let o = ConnectOptions::new("rediss-cluster://u:p@127.0.0.1:7000");
    let Target::Cluster(c) = o.target().unwrap() else {
        panic!("a cluster")
    };
    let info = c.node_client("127.0.0.1", 7000).unwrap();
    assert!(matches!(
        info.get_connection_info().addr(),
        ConnectionAddr::TcpTls {
            insecure: false,
            ..
        }
    ));
    assert!(Target::Cluster(c).is_local());

    let mut o = ConnectOptions::new("redis-cluster://a:1");
    o.db = Some(2);
    assert!(matches!(o.target(), Err(Error::InvalidArgument(m)) if m.contains("only database 0")));

    let mut o = ConnectOptions::new("redis-sentinel://:spw@s1:26379,s2?master=mymaster");
    o.password = Some("masterpw".into());
    let (t, s) = o.topology().unwrap();
    assert_eq!(t, Topology::Sentinel);
    let s = s.unwrap();
    assert_eq!(s.addrs, ["s1:26379", "s2:26379"]);
    assert_eq!(
        (s.master.as_str(), s.password.as_deref()),
        ("mymaster", Some("spw"))
    );
    assert_eq!(o.data_credentials(), (None, Some("masterpw".into()), 0));
    assert!(matches!(o.target(), Ok(Target::Sentinel(_))));

    let mut both = ConnectOptions::new("redis-cluster://a:1");
    both.sentinel = Some(SentinelOptions {
        addrs: vec!["s:1".into()],
        master: "m".into(),
        ..SentinelOptions::default()
    });
    assert!(both.topology().is_err());
    let nameless = ConnectOptions {
        sentinel: Some(SentinelOptions {
            addrs: vec!["s:1".into()],
            ..SentinelOptions::default()
        }),
        ..ConnectOptions::default()
    };
    assert!(nameless.topology().is_err());
    assert_eq!(
        ConnectOptions::new("redis://h:1/3").topology().unwrap().0,
        Topology::Standalone
    );
}

/// TLS and credentials behind Sentinel, as built (no TLS sentinel set
/// is started by the tests): the sentinels' own clients (the watcher's)
/// carry the sentinels' user and password, the master's carry the
/// master's user, password and database; both use TLS, insecure when
/// asked.
#[test]
fn sentinel_tls_and_credentials_are_built_into_every_client() {
    let mut o = ConnectOptions::new("redis-sentinel://:spw@h1:26379,h2:26380/4?master=m");
    o.username = Some("deck".into());
    o.password = Some("mpw".into());
    o.insecure = true;
    let Target::Sentinel(r) = o.target().unwrap() else {
        panic!("a Sentinel target");
    };
    let sentinels = r.sentinel_clients();
    assert_eq!(sentinels.len(), 2);
    for (c, port) in sentinels.iter().zip([26379, 26380]) {
        let info = c.get_connection_info();
        assert!(matches!(
            info.addr(),
            ConnectionAddr::TcpTls { port: p, insecure: true, .. } if *p == port
        ));
        assert_eq!(info.redis_settings().password(), Some("spw"));
        assert_eq!(info.redis_settings().username(), None);
    }
    let master = r.masters_for_tests().client("10.0.0.9", 6390).unwrap();
    let info = master.get_connection_info();
    assert!(matches!(
        info.addr(),
        ConnectionAddr::TcpTls {
            port: 6390,
            insecure: true,
            ..
        }
    ));
    let s = info.redis_settings();
    assert_eq!(
        (s.username(), s.password(), s.db()),
        (Some("deck"), Some("mpw"), 4)
    );

    let plain = ConnectOptions::new("redis-sentinel://h1:26379?master=m");
    let Target::Sentinel(r) = plain.target().unwrap() else {
        panic!("a Sentinel target");
    };
    assert!(matches!(
        r.sentinel_clients()[0].get_connection_info().addr(),
        ConnectionAddr::Tcp(_, 26379)
    ));
}
