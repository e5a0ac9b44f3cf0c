"""The admission webhook: AdmissionReview v1 over HTTPS, validating with the check rules and mutating."""
