//! `s3://bucket/prefix` and `gs://bucket/prefix`: which service, which bucket, which prefix.

use crate::format::path::split_scheme;
use crate::storage::LocationError;

/// The object-store service a URL names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Service {
    S3,
    Gcs,
}

impl Service {
    pub fn scheme(self) -> &'static str {
        match self {
            Service::S3 => "s3",
            Service::Gcs => "gs",
        }
    }
}

/// A parsed object-store dataset location.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CloudUrl {
    pub service: Service,
    pub bucket: String,
    /// The key prefix, without leading or trailing `/`; empty for the bucket's top level.
    pub prefix: String,
}

impl CloudUrl {
    /// Parses `s3://bucket[/prefix]` or `gs://bucket[/prefix]`; the reason it cannot be
    /// parsed otherwise. Query strings, fragments, `.`/`..` segments and empty segments inside
    /// the prefix are refused: a dataset location has to name one place unambiguously.
    pub fn parse(url: &str) -> Result<CloudUrl, LocationError> {
        let (scheme, rest) = split_scheme(url).ok_or(LocationError::NotAUrl)?;
        let service = match scheme.to_ascii_lowercase().as_str() {
            "s3" => Service::S3,
            "gs" => Service::Gcs,
            other => return Err(LocationError::UnsupportedScheme(other.to_string())),
        };
        if rest.contains(['?', '#']) {
            return Err(LocationError::QueryOrFragment);
        }
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Err(LocationError::NoBucket);
        }
        let bucket_ok = bucket.bytes().all(|b| {
            b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'-' | b'.' | b'_')
        });
        if !bucket_ok {
            return Err(LocationError::InvalidBucket(bucket.to_string()));
        }
        let prefix = prefix.trim_end_matches('/');
        if !prefix.is_empty()
            && prefix
                .split('/')
                .any(|segment| segment.is_empty() || segment == "." || segment == "..")
        {
            return Err(LocationError::InvalidPrefix(prefix.to_string()));
        }
        Ok(CloudUrl {
            service,
            bucket: bucket.to_string(),
            prefix: prefix.to_string(),
        })
    }

    /// The full key of a dataset-relative path.
    pub fn key(&self, relative: &str) -> String {
        if self.prefix.is_empty() {
            relative.to_string()
        } else {
            format!("{}/{relative}", self.prefix)
        }
    }
}

impl std::fmt::Display for CloudUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}://{}", self.service.scheme(), self.bucket)?;
        if !self.prefix.is_empty() {
            write!(f, "/{}", self.prefix)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_bucket_and_prefix() {
        let url = CloudUrl::parse("s3://b/some/prefix/").unwrap();
        assert_eq!(url.service, Service::S3);
        assert_eq!(url.bucket, "b");
        assert_eq!(url.prefix, "some/prefix");
        assert_eq!(url.key("root.json"), "some/prefix/root.json");
        assert_eq!(url.to_string(), "s3://b/some/prefix");
        let url = CloudUrl::parse("GS://bucket-1").unwrap();
        assert_eq!(url.service, Service::Gcs);
        assert_eq!(url.prefix, "");
        assert_eq!(url.key("root.json"), "root.json");
        assert_eq!(url.to_string(), "gs://bucket-1");
    }

    #[test]
    fn refuses_ambiguous_locations() {
        for bad in [
            "s3://",
            "s3:///p",
            "s3://B/p",
            "s3://b/a//c",
            "s3://b/../c",
            "s3://b/p?x=1",
            "az://b/p",
            "b/p",
        ] {
            assert!(CloudUrl::parse(bad).is_err(), "{bad}");
        }
    }
}
