-- lazybreaker-fleet's PostgreSQL schema: one row per shared breaker, and one function per
-- store operation (each one round trip, atomic: the row is locked for the step). Applied by
-- `PostgresStore` on first use (idempotent, under an advisory lock), or by hand with
-- `psql -f` where the application's role may not create objects.
-- Times are microseconds since the Unix epoch on the server's clock (`clock_timestamp()`).
-- A deadline (now plus an open period or a lease) saturates at 2^53 (9007199254740992), the
-- latest a record may hold, whatever the duration given: never `bigint out of range`.

CREATE TABLE IF NOT EXISTS lazybreaker_fleet (
    name       text    PRIMARY KEY,
    -- Fences every update: a record only ever moves to a higher generation.
    generation bigint  NOT NULL DEFAULT 0,
    -- Open (until `until_us`, then half-open) or closed.
    open       boolean NOT NULL DEFAULT false,
    until_us   bigint  NOT NULL DEFAULT 0,
    -- Probe successes of the half-open period.
    ok         bigint  NOT NULL DEFAULT 0,
    -- Half-open probe leases: holder -> expiry (us).
    probes     jsonb   NOT NULL DEFAULT '{}',
    -- Trip votes toward a quorum: instance -> time of the vote (us).
    votes      jsonb   NOT NULL DEFAULT '{}'
);

CREATE OR REPLACE FUNCTION lazybreaker_fleet_now() RETURNS bigint
LANGUAGE sql VOLATILE AS $$
    SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint
$$;

-- The record as it stands (closed at generation 0 when there is none), with the server time.
CREATE OR REPLACE FUNCTION lazybreaker_fleet_read(p_name text)
RETURNS TABLE (r_generation bigint, r_open boolean, r_until_us bigint, r_now_us bigint, r_written boolean)
LANGUAGE sql VOLATILE AS $$
    SELECT coalesce(f.generation, 0), coalesce(f.open, false), coalesce(f.until_us, 0),
           lazybreaker_fleet_now(), false
    FROM (SELECT 1) AS one LEFT JOIN lazybreaker_fleet AS f ON f.name = p_name
$$;

-- Publishes a decision at p_generation unless the record is there or later already: open for
-- p_open_us from the server's now (a trip), or closed (a recovery). With a quorum above 1, a
-- trip is a vote of p_instance, and opens the record only once p_quorum distinct instances
-- voted within p_window_us. A decision written clears the period's leases and votes.
CREATE OR REPLACE FUNCTION lazybreaker_fleet_publish(
    p_name text, p_generation bigint, p_open boolean, p_open_us bigint,
    p_quorum bigint, p_window_us bigint, p_instance text)
RETURNS TABLE (r_generation bigint, r_open boolean, r_until_us bigint, r_now_us bigint, r_written boolean)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v_now   bigint := lazybreaker_fleet_now();
    v_row   lazybreaker_fleet%ROWTYPE;
    v_write boolean;
    v_votes jsonb;
BEGIN
    INSERT INTO lazybreaker_fleet (name) VALUES (p_name) ON CONFLICT (name) DO NOTHING;
    SELECT * INTO v_row FROM lazybreaker_fleet AS f WHERE f.name = p_name FOR UPDATE;
    v_write := v_row.generation < p_generation;
    IF v_write AND p_open AND p_quorum > 1 THEN
        SELECT coalesce(jsonb_object_agg(e.key, e.value), '{}'::jsonb) INTO v_votes
        FROM jsonb_each(v_row.votes || jsonb_build_object(p_instance, v_now)) AS e
        WHERE jsonb_typeof(e.value) = 'number'
          AND (e.value)::bigint > v_now - least(p_window_us, 9007199254740992);
        UPDATE lazybreaker_fleet AS f SET votes = v_votes WHERE f.name = p_name;
        v_write := (SELECT count(*) FROM jsonb_object_keys(v_votes)) >= p_quorum;
    END IF;
    IF v_write THEN
        UPDATE lazybreaker_fleet AS f
        SET generation = p_generation, open = p_open,
            until_us = CASE WHEN p_open
                THEN least(v_now + least(p_open_us, 9007199254740992), 9007199254740992)
                ELSE 0 END,
            ok = 0, probes = '{}', votes = '{}'
        WHERE f.name = p_name
        RETURNING * INTO v_row;
    END IF;
    RETURN QUERY SELECT v_row.generation, v_row.open, v_row.until_us, v_now, v_write;
END
$$;

-- Takes one of p_max probe leases of the half-open period at p_generation (the record open at
-- p_generation, its open period over on the server's clock), held by p_holder for p_lease_us
-- unless given back: 1 taken, 0 all held, -1 not half-open at that generation.
CREATE OR REPLACE FUNCTION lazybreaker_fleet_lease(
    p_name text, p_generation bigint, p_max bigint, p_lease_us bigint, p_holder text)
RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v_now    bigint := lazybreaker_fleet_now();
    v_row    lazybreaker_fleet%ROWTYPE;
    v_probes jsonb;
BEGIN
    SELECT * INTO v_row FROM lazybreaker_fleet AS f WHERE f.name = p_name FOR UPDATE;
    IF NOT FOUND OR v_row.generation <> p_generation OR NOT v_row.open
       OR v_now < v_row.until_us THEN
        RETURN -1;
    END IF;
    SELECT coalesce(jsonb_object_agg(e.key, e.value), '{}'::jsonb) INTO v_probes
    FROM jsonb_each(v_row.probes) AS e
    WHERE jsonb_typeof(e.value) = 'number' AND (e.value)::bigint > v_now;
    IF (SELECT count(*) FROM jsonb_object_keys(v_probes)) >= p_max THEN
        UPDATE lazybreaker_fleet AS f SET probes = v_probes WHERE f.name = p_name;
        RETURN 0;
    END IF;
    UPDATE lazybreaker_fleet AS f
    SET probes = v_probes || jsonb_build_object(p_holder,
        least(v_now + least(p_lease_us, 9007199254740992), 9007199254740992))
    WHERE f.name = p_name;
    RETURN 1;
END
$$;

-- Ends probe p_holder of the half-open period at p_generation: gives its lease back and, if
-- it succeeded while its lease was held, counts the success; the p_max-th success of the
-- period closes the record at p_generation + 1 (r_written then).
CREATE OR REPLACE FUNCTION lazybreaker_fleet_finish(
    p_name text, p_generation bigint, p_max bigint, p_succeeded boolean, p_holder text)
RETURNS TABLE (r_generation bigint, r_open boolean, r_until_us bigint, r_now_us bigint, r_written boolean)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v_now     bigint := lazybreaker_fleet_now();
    v_row     lazybreaker_fleet%ROWTYPE;
    v_held    boolean;
    v_written boolean := false;
BEGIN
    SELECT * INTO v_row FROM lazybreaker_fleet AS f WHERE f.name = p_name FOR UPDATE;
    IF NOT FOUND THEN
        RETURN QUERY SELECT 0::bigint, false, 0::bigint, v_now, false;
        RETURN;
    END IF;
    v_held := jsonb_typeof(v_row.probes -> p_holder) = 'number'
              AND (v_row.probes -> p_holder)::bigint > v_now;
    v_row.probes := v_row.probes - p_holder;
    IF v_held AND p_succeeded AND v_row.generation = p_generation AND v_row.open THEN
        v_row.ok := v_row.ok + 1;
        IF v_row.ok >= p_max THEN
            v_row.generation := p_generation + 1;
            v_row.open := false;
            v_row.until_us := 0;
            v_row.ok := 0;
            v_row.probes := '{}';
            v_row.votes := '{}';
            v_written := true;
        END IF;
    END IF;
    UPDATE lazybreaker_fleet AS f
    SET generation = v_row.generation, open = v_row.open, until_us = v_row.until_us,
        ok = v_row.ok, probes = v_row.probes, votes = v_row.votes
    WHERE f.name = p_name;
    RETURN QUERY SELECT v_row.generation, v_row.open, v_row.until_us, v_now, v_written;
END
$$;
